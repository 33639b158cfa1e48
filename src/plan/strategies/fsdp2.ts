/**
 * FSDP2 (torch.distributed.fsdp.fully_shard) as torchtitan and torchtune apply it: a unit per block and a root unit
 * (embeddings, final norm, output layer) gathered for the whole step; parameters, gradients and optimizer states
 * sharded over the data-parallel GPUs. A unit is all-gathered (flat buffer, then its unsharded tensors) before its
 * forward pass and freed after it, but for the last block, whose backward pass needs it at once; gathered again for
 * its backward pass; its gradients reduce-scattered from an fp32 buffer (MixedPrecisionPolicy's reduce_dtype). Under
 * amp-bf16 the blocks compute in bf16 from bf16-gathered weights (param_dtype), without autocast. With gradient
 * accumulation the gradients are reduce-scattered after each micro-batch (torchtitan and torchtune leave FSDP2's gradient sync on): the shards accumulate.
 */
import { formatCount } from '../../units.js';
import { commLines } from './comm.js';
import { ALL_GATHER_STREAM, allGather, reduceScatter } from './gather.js';
import { stateLayout } from './layout.js';
import type { Sharding } from './types.js';
import type { StepSetup } from '../program/step-setup.js';

const mixed = (o: { precision: string; lora?: unknown }): boolean => o.precision === 'amp-bf16' && !o.lora;
const unitNumels = (s: StepSetup, moe: boolean): number[] => (moe ? s.table.moe : s.table.dense).tensors.map((t) => t.numel);

export const fsdp2: Sharding = {
  name: 'fsdp2',
  bf16Params: mixed,
  layout: (input) => stateLayout(input, { params: true, grads: true, states: true, stateName: 'FSDP', gatheredBytes: mixed(input.o) ? 2 : undefined }),
  gatherRoot: (mem, s) =>
    allGather(
      mem,
      s.table.ends.map((t) => t.numel),
      s.layout.weightBytes,
      s.tags.line(
        'parameters: root unit gathered (FSDP)',
        'parametersBytes',
        'the embeddings and the output layer all-gathered once and held for the whole step',
      ),
      s.tags.transient,
    ),
  releaseRoot: (mem, s, root, grads) => {
    {
      const keys = s.table.ends.filter((t) => t.trains).map((t) => t.key);
      const sink = keys.map((k) => grads.get(k) ?? 0).filter((h) => h !== 0);
      for (const k of keys) grads.delete(k);
      const n = s.table.ends.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0);
      if (n > 0)
        reduceScatter(mem, sink, n, s.dp, { buffer: 4, shard: s.layout.keptGradBytes }, 'root.shard', grads, {
          grads: s.tags.grads,
          kept: s.tags.block.paramGrads,
        });
    }
    mem.free(...root);
  },
  gatherUnit: (mem, s, moe) =>
    allGather(
      mem,
      unitNumels(s, moe),
      s.layout.weightBytes,
      s.tags.line(
        'parameters: a block gathered (FSDP all-gather)',
        'parametersBytes',
        (b) => `one unit's unsharded parameters: ${formatCount(Math.round(b))} bytes`,
      ),
      s.tags.transient,
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
    ),
  // FSDP2 prefetches the next unit while one runs (its all-gather stream): one more unit in flight
  overheads: (s) => {
    const unit = Math.max(...[false, s.table.moeLayers > 0].map((moe) => unitNumels(s, moe).reduce((a, n) => a + n, 0)));
    return commLines(s.o.parallel.gpus, unit * s.layout.weightBytes, ' + the next unit all-gathered ahead (FSDP prefetch)');
  },
};
void ALL_GATHER_STREAM;
