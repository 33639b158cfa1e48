/**
 * One GPU, or PyTorch's DistributedDataParallel: every GPU holds every state whole; gradients are all-reduced in
 * buckets (torch.nn.parallel.DistributedDataParallel, bucket_cap_mb 25 by default).
 */
import { CONSTANTS } from '../constants.js';
import { commLines } from './comm.js';
import { stateLayout } from './layout.js';
import type { Sharding } from './types.js';

export const ddp: Sharding = {
  name: 'ddp',
  bf16Params: () => false,
  layout: (input) => stateLayout(input, { params: false, grads: false, states: false }),
  gatherRoot: () => [],
  releaseRoot: () => {},
  gatherUnit: () => [],
  reshard: () => {},
  keepsAfterForward: () => true,
  collectsGrads: () => false,
  reduce: () => {},
  overheads: (s) =>
    commLines(s.o.parallel.gpus, 2 * CONSTANTS.ddpBucketBytes.value, ` + two ${CONSTANTS.ddpBucketBytes.value / 2 ** 20} MiB gradient buckets (DDP)`),
};
