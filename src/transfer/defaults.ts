/**
 * Default shape of a stager, from the machine. The figures behind them were measured on an H200 machine (16 host
 * cores, PCIe 5.0 x16) by `gpumem bench --only transfer` and a native CUDA C program (docs/performance.md): host
 * copies into pinned memory scale to about 8 threads and fall off beyond; chunks of 8 MiB keep the copy engine fed
 * while the threads fill the next; below about 1 MiB a plain pageable copy costs less than the staging round trip.
 */
import { availableParallelism, totalmem } from 'node:os';

const MiB = 2 ** 20;

export interface TransferSettings {
  /** Threads that copy between pageable memory and the pinned chunks. */
  threads: number;
  /** Bytes of one pinned chunk. */
  chunkBytes: number;
  /** Chunks in the ring: while the copy engine drains one, the threads fill the others. */
  depth: number;
  /** Transfers smaller than this go straight through the runtime's pageable copy. */
  directBelow: number;
  /** Most pinned memory a stager may hold (chunkBytes x depth). */
  pinnedBudgetBytes: number;
}

/** The defaults on this machine: half its cores, at most 8, for copies; 8 MiB chunks, 4 deep; at most 1/16 of RAM pinned. */
export function transferDefaults(cores = availableParallelism(), ramBytes = totalmem()): TransferSettings {
  return {
    threads: Math.max(1, Math.min(8, Math.floor(cores / 2))),
    chunkBytes: 8 * MiB,
    depth: 4,
    directBelow: MiB,
    pinnedBudgetBytes: Math.max(64 * MiB, Math.min(4096 * MiB, Math.floor(ramBytes / 16))),
  };
}
