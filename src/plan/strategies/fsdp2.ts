/**
 * FSDP2 (torch.distributed.fsdp.fully_shard) as torchtitan and torchtune apply it: a unit per block and a root unit
 * (embeddings, final norm, output layer) gathered for the whole step; parameters, gradients and optimizer states
 * sharded over the data-parallel GPUs. A unit is all-gathered (flat buffer, then its unsharded tensors) before its
 * forward pass and freed after it, but for the last block, whose backward pass needs it at once; gathered again for
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
import type { Sharding } from './types.js';
import type { Precision, TrainOptions } from '../options.js';
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

export const fsdp2: Sharding = {
  name: 'fsdp2',
  bf16Params: (o) => bf16Gather(o, dpOf(o)),
  layout: (input) =>
    stateLayout(input, { params: true, grads: true, states: true, stateName: 'FSDP', gatheredBytes: bf16Gather(input.o, input.dp) ? 2 : undefined }),
  gatherRoot: (mem, s) =>
    unshard(
      mem,
      s,
      s.table.ends.map((t) => t.numel),
      s.tags.line(
        'parameters: root unit gathered (FSDP)',
        'parametersBytes',
        s.dp > 1
          ? 'the embeddings and the output layer all-gathered once and held for the whole step'
          : 'the embeddings and the output layer unsharded (one GPU: the shards copied) and held for the whole step',
      ),
    ),
  releaseRoot: (mem, s, root, grads) => {
    {
      const keys = s.table.ends.filter((t) => t.trains).map((t) => t.key);
      const sink = keys.map((k) => grads.get(k) ?? 0).filter((h) => h !== 0);
      for (const k of keys) grads.delete(k);
      const n = s.table.ends.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0);
      if (n > 0)
        reduceScatter(
          mem,
          sink,
          n,
          s.dp,
          { buffer: 4, shard: s.layout.keptGradBytes },
          'root.shard',
          grads,
          {
            grads: s.tags.grads,
            kept: s.tags.block.paramGrads,
          },
          s.comm,
        );
    }
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
  keepsAfterForward: (last) => last,
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
  // FSDP2 prefetches the next unit while one runs (its all-gather stream): one more unit in flight
  overheads: (s) => {
    const unit = Math.max(...[false, s.table.moeLayers > 0].map((moe) => unitNumels(s, moe).reduce((a, n) => a + n, 0)));
    return commLines(s.o.parallel.gpus, unit * s.layout.weightBytes, ' + the next unit all-gathered ahead (FSDP prefetch)');
  },
};
