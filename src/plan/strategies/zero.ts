/**
 * DeepSpeed's ZeRO (Rajbhandari et al. 2020): stage 1 shards the optimizer states (fp32 master weights included) over
 * the data-parallel GPUs, stage 2 the gradients too (each GPU keeps its partition, reduced in buckets), stage 3 the
 * parameters too, gathered for each block's forward and backward pass and released after; the embeddings and the
 * output layer are gathered where they are used, not held for the step.
 */
import { commLines } from './comm.js';
import { allGather } from './gather.js';
import { stateLayout } from './layout.js';
import type { Sharding } from './types.js';
import type { StepSetup } from '../program/step-setup.js';
import { CONSTANTS } from '../constants.js';

const stage = (s: { o: { parallel: { zero: number } } }): number => s.o.parallel.zero;
const unitNumels = (s: StepSetup, moe: boolean): number[] => (moe ? s.table.moe : s.table.dense).tensors.map((t) => t.numel);

export const zero: Sharding = {
  name: 'deepspeed',
  bf16Params: () => false,
  layout: (input) => {
    const z = input.o.parallel.zero;
    return stateLayout(input, { params: z >= 3, grads: z >= 2, states: z >= 1, stateName: `ZeRO-${z}` });
  },
  gatherRoot: () => [],
  releaseRoot: (mem, s, _root, grads) => {
    if (stage(s) < 2) return;
    // the ends' gradients go to this GPU's partition like the blocks'
    for (const t of s.table.ends) {
      const h = grads.get(t.key);
      if (!h || !t.trains) continue;
      grads.delete(t.key);
      const shard = mem.alloc((t.numel * s.layout.keptGradBytes) / s.dp, s.tags.block.paramGrads);
      mem.free(h);
      if (grads.has(`${t.key}.part`)) mem.free(shard);
      else grads.set(`${t.key}.part`, shard);
    }
  },
  gatherUnit: (mem, s, moe) =>
    stage(s) >= 3
      ? allGather(
          mem,
          unitNumels(s, moe),
          s.layout.weightBytes,
          s.tags.line('parameters: a block gathered (ZeRO-3)', 'parametersBytes', "one block's parameters gathered for its pass"),
          s.tags.transient,
        )
      : [],
  reshard: (mem, gathered) => mem.free(...gathered),
  keepsAfterForward: () => false,
  collectsGrads: (o) => o.parallel.zero >= 2,
  reduce: (mem, s, moe, sink, grads) => {
    const n = (moe ? s.table.moe : s.table.dense).tensors.filter((t) => t.trains).reduce((a, t) => a + t.numel, 0);
    const shard = mem.alloc((n * s.layout.keptGradBytes) / s.dp, s.tags.grads);
    mem.free(...sink);
    const key = `${moe ? 'moe' : 'dense'}.part`;
    if (grads.has(key)) mem.free(shard);
    else {
      mem.retag(shard, s.tags.block.paramGrads);
      grads.set(key, shard);
    }
  },
  overheads: (s) => {
    if (stage(s) >= 3) {
      const unit = Math.max(...[false, s.table.moeLayers > 0].map((moe) => unitNumels(s, moe).reduce((a, n) => a + n, 0)));
      return commLines(s.o.parallel.gpus, 2 * unit * s.layout.weightBytes, ' + all-gather of the two largest layers in flight (ZeRO-3 prefetch)');
    }
    return commLines(s.o.parallel.gpus, 2 * CONSTANTS.ddpBucketBytes.value, ` + two ${CONSTANTS.ddpBucketBytes.value / 2 ** 20} MiB gradient buckets`);
  },
};
