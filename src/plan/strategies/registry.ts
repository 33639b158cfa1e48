/** The distributed strategies by name: a new one is a file here and a line below. */
import type { TrainOptions } from '../options.js';
import { ddp } from './ddp.js';
import { fsdp1 } from './fsdp1.js';
import { fsdp2 } from './fsdp2.js';
import type { Sharding } from './types.js';
import { zero } from './zero.js';
import { megatronOptimizer } from '../frameworks/megatron.js';

export const STRATEGIES: Record<string, Sharding> = { ddp, deepspeed: zero, fsdp1, fsdp2, megatron: megatronOptimizer };

/** The strategy a run names (TrainOptions.sharding). */
export function shardingOf(o: Pick<TrainOptions, 'sharding'>): Sharding {
  return STRATEGIES[o.sharding] ?? ddp;
}
