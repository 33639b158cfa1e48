/**
 * FSDP2 (torch.distributed.fsdp.fully_shard) as torchtitan and torchtune apply it: a unit per block, and the ends
 * (embeddings, final norm, output layer) by the run's unit layout (options.ts Fsdp2Units): in the root unit, gathered
 * for the whole micro-batch (root-ends: torchtune, torchtitan before 83e6941), or apart from it (ends-apart:
 * torchtitan from 83e6941, frameworks/torchtitan-commits.ts): the embeddings one unit, resharded after its forward
 * pass and gathered again for its gradient, [final norm, output layer] one unit kept from its forward pass to its
 * backward pass, the root holding nothing. Parameters, gradients and optimizer states are sharded over the
 * data-parallel GPUs. A unit is all-gathered (flat buffer, then its unsharded tensors) before its forward pass and
 * freed after it, but for the last block under root-ends, whose backward pass needs it at once; gathered again for
 * its backward pass; its gradients reduce-scattered from an fp32 buffer (MixedPrecisionPolicy's reduce_dtype). Under
 * amp-bf16 the blocks compute in bf16 from bf16-gathered weights (param_dtype), without autocast. With gradient
 * accumulation the gradients are reduce-scattered after each micro-batch (torchtitan and torchtune leave FSDP2's gradient sync on): the shards accumulate.
 *
 * A shard group of one GPU gathers nothing (torch >= 2.9, pytorch/pytorch#160135; torch 2.11
 * torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, FSDPParamGroup.unshard returns an empty AllGatherResult
 * when world_size == 1, and wait_for_unshard copies each sharded parameter into `all_gather_outputs[0]`, made with
 * torch.empty_like(sharded_data), on the current stream): the unsharded parameters are a copy of the shards in the
 * parameters' own dtype, so MixedPrecisionPolicy's param_dtype casts nothing and the blocks compute under autocast
 * from fp32 weights, as a run without FSDP does. The root unit's copy is kept from its forward pass to the end of
 * its backward pass (_fsdp_state.py, FSDPState._lazy_init: the root is not resharded after forward).
 */
import { formatCount } from '../../units.js';
import { commLines } from './comm.js';
import { allGather, dropReduceScatterInput, reduceScatter } from './gather.js';
import { stateLayout } from './layout.js';
import type { EndUnit, Sharding } from './types.js';
import type { Precision, TrainOptions } from '../options.js';
import type { GradStore } from '../program/linear.js';
import type { ParamTable, ParamTensor } from '../program/params-table.js';
import { basePrecision } from '../precision.js';
import type { H, Mem, Tag } from '../program/mem.js';
import type { StepSetup } from '../program/step-setup.js';

const mixed = (o: { precision: Precision; lora?: unknown }): boolean => basePrecision(o.precision) === 'amp-bf16' && !o.lora;
/** The data-parallel GPUs the units are sharded over (step-setup.ts's dp). */
const dpOf = (o: TrainOptions): number => o.parallel.gpus / (o.parallel.tp * o.parallel.pp);
/** MixedPrecisionPolicy(param_dtype=bf16) gathers bf16 weights, but only where there is an all-gather (dp > 1). */
const bf16Gather = (o: TrainOptions, dp: number): boolean => mixed(o) && dp > 1;

/** A unit made whole: all-gathered over the shard group, or on one GPU the shards copied (no collective). */
function unshard(mem: Mem, s: StepSetup, numels: readonly number[], tag: Tag): H[] {
  if (s.dp > 1) return allGather(mem, numels, s.layout.weightBytes, tag, s.tags.transient);
  return numels.map((n) => mem.alloc(n * s.layout.weightBytes, tag));
}
const unitNumels = (s: StepSetup, moe: boolean): number[] => (moe ? s.table.moe : s.table.dense).tensors.map((t) => t.numel);
const apart = (o: TrainOptions): boolean => o.fsdpUnits === 'ends-apart';

/**
 * The ends' units under ends-apart (torchtitan/models/llama3/infra/parallelize.py `apply_fsdp` from 83e6941):
 * fully_shard(model.tok_embeddings, reshard_after_forward=not pp_enabled) where this stage holds the embeddings, and
 * fully_shard([model.norm, model.output], reshard_after_forward=False) where it holds the output layer (its adapter
 * with it). A tied output layer is the embedding's weight: torchtitan groups tok_embeddings, norm and output in one
 * unit kept from forward to backward (torchtitan 29e27d0 for llama4, 8953d2e for llama3), which holds what the root
 * unit would, so the root keeps them.
 */
function endUnits(o: TrainOptions, table: ParamTable): EndUnit[] {
  if (!apart(o)) return [];
  const head = table.ends.filter((t) => t.key !== 'embed');
  const embed = table.ends.filter((t) => t.key === 'embed');
  const tiedHere = embed.length > 0 && table.last && !head.some((t) => t.key === 'lm_head');
  if (tiedHere) return [];
  const units: EndUnit[] = [];
  if (embed.length) units.push({ name: 'embedding', tensors: embed, keepsAfterForward: o.parallel.pp > 1 });
  if (table.last && head.some((t) => t.key === 'lm_head')) units.push({ name: 'head', tensors: head, keepsAfterForward: true });
  return units;
}

/** The ends the root unit holds: those in no unit of their own. */
const rootEnds = (s: StepSetup): ParamTensor[] => {
  const own = new Set([s.ends.embedding, s.ends.head].flatMap((u) => u?.tensors ?? []));
  return s.table.ends.filter((t) => !own.has(t));
};

/** The gradients of `tensors` (in `grads` under their keys) reduce-scattered into one shard kept as `key`. */
function reduceEnds(mem: Mem, s: StepSetup, tensors: readonly ParamTensor[], key: string, grads: GradStore): void {
  const keys = tensors.filter((t) => t.trains).map((t) => t.key);
  const sink = keys.map((k) => grads.get(k) ?? 0).filter((h) => h !== 0);
  for (const k of keys) grads.delete(k);
  const n = tensors.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0);
  if (n > 0)
    reduceScatter(mem, sink, n, s.dp, { buffer: 4, shard: s.layout.keptGradBytes }, key, grads, { grads: s.tags.grads, kept: s.tags.block.paramGrads }, s.comm);
}

/** The tag of an end unit's gathered parameters. */
function endTag(s: StepSetup, unit: EndUnit): Tag {
  return unit.name === 'embedding'
    ? s.tags.line(
        'parameters: embedding unit gathered (FSDP)',
        'parametersBytes',
        unit.keepsAfterForward
          ? 'the embeddings, their own unit, kept from their forward to their backward pass (pipeline stage: reshard_after_forward=False)'
          : 'the embeddings, their own unit: gathered for their forward pass, resharded, gathered again for their gradient',
      )
    : s.tags.line(
        'parameters: output unit gathered (FSDP, kept to its backward pass)',
        'parametersBytes',
        'the final norm and the output layer, one unit, gathered before the norm and not resharded after the forward pass (reshard_after_forward=False)',
      );
}

export const fsdp2: Sharding = {
  name: 'fsdp2',
  bf16Params: (o) => bf16Gather(o, dpOf(o)),
  layout: (input) =>
    stateLayout(input, { params: true, grads: true, states: true, stateName: 'FSDP', gatheredBytes: bf16Gather(input.o, input.dp) ? 2 : undefined }),
  endUnits,
  gatherEnd: (mem, s, unit) =>
    unshard(
      mem,
      s,
      unit.tensors.map((t) => t.numel),
      endTag(s, unit),
    ),
  // FSDPParamGroup.post_backward (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py): reshard(), then
  // foreach_reduce of the unit's gradients
  releaseEnd: (mem, s, unit, gathered, grads) => {
    mem.free(...gathered);
    reduceEnds(mem, s, unit.tensors, `${unit.name}.shard`, grads);
  },
  // the root holds the ends that are in no unit of their own: none under ends-apart (an untied model)
  gatherRoot: (mem, s) =>
    unshard(
      mem,
      s,
      rootEnds(s).map((t) => t.numel),
      s.tags.line(
        'parameters: root unit gathered (FSDP)',
        'parametersBytes',
        s.dp > 1
          ? 'the embeddings and the output layer all-gathered once and held for the whole step'
          : 'the embeddings and the output layer unsharded (one GPU: the shards copied) and held for the whole step',
      ),
    ),
  releaseRoot: (mem, s, root, grads) => {
    reduceEnds(mem, s, rootEnds(s), 'root.shard', grads);
    mem.free(...root);
    dropReduceScatterInput(mem, s.comm);
  },
  gatherUnit: (mem, s, moe) =>
    unshard(
      mem,
      s,
      unitNumels(s, moe),
      s.tags.line(
        'parameters: a block gathered (FSDP all-gather)',
        'parametersBytes',
        (b) => `one unit's unsharded parameters: ${formatCount(Math.round(b))} bytes`,
      ),
    ),
  reshard: (mem, gathered) => mem.free(...gathered),
  // root-ends: torchtitan before 83e6941 kept the last block (reshard_after_forward = layer_id < n_layers - 1);
  // ends-apart: every block resharded, but on a pipeline stage (reshard_after_forward = not pp_enabled)
  keepsAfterForward: (last, o) => (apart(o) ? o.parallel.pp > 1 : last),
  collectsGrads: () => true,
  reduce: (mem, s, moe, sink, grads) =>
    reduceScatter(
      mem,
      sink,
      (moe ? s.table.moe : s.table.dense).tensors.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0),
      s.dp,
      { buffer: 4, shard: s.layout.keptGradBytes },
      `${moe ? 'moe' : 'dense'}.shard`,
      grads,
      {
        grads: s.tags.grads,
        kept: s.tags.block.paramGrads,
      },
      s.comm,
    ),
  // FSDP2 prefetches the next unit while one runs (its all-gather stream): one more unit in flight. Under ends-apart
  // the embedding's unit is the one prefetched during the first block's backward pass (FSDPParamGroup._backward_prefetch),
  // and the head's all-gather may be issued while the last block still runs: the largest of them all counts
  overheads: (s) => {
    const ends = [s.ends.embedding, s.ends.head].map((u) => (u?.tensors ?? []).reduce((a, t) => a + t.numel, 0));
    const unit = Math.max(...[false, s.table.moeLayers > 0].map((moe) => unitNumels(s, moe).reduce((a, n) => a + n, 0)), ...ends);
    return commLines(s.o.parallel.gpus, unit * s.layout.weightBytes, ' + the next unit all-gathered ahead (FSDP prefetch)');
  },
};
