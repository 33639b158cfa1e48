/**
 * Default shape of a stager, from the machine. The figures behind them were measured on an H200 machine (16 host
 * cores, PCIe 5.0 x16, 1 GiB transfers; docs/performance.md): with 12 threads staged uploads and downloads reached
 * 48-52 GB/s, with 8 threads 27-52 GB/s (downloads suffered most), with 16 they fell back as the threads competed
 * with the process's own; a ring 8 deep kept downloads fed where 4 left the threads waiting; 8 MiB chunks did as
 * well as 16 MiB. So: all cores but a quarter (at most 12), 8 MiB chunks, 8 deep. Below about 1 MiB a plain
 * pageable copy costs less than the staging round trip.
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

/** The defaults on this machine: all cores but a quarter (at most 12) for copies; 8 MiB chunks, 8 deep; at most 1/16 of RAM pinned. */
export function transferDefaults(cores = availableParallelism(), ramBytes = totalmem()): TransferSettings {
  return {
    threads: Math.max(1, Math.min(12, cores - Math.max(1, Math.floor(cores / 4)))),
    chunkBytes: 8 * MiB,
    depth: 8,
    directBelow: MiB,
    pinnedBudgetBytes: Math.max(64 * MiB, Math.min(4096 * MiB, Math.floor(ramBytes / 16))),
  };
}
