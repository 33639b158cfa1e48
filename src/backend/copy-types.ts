/**
 * Copies a backend makes outside its streams' single copies: the host threads of a staged transfer, and batches of
 * copies carried by one native call. Part of the Backend interface (backend.ts re-exports every type here).
 */
import type { Address } from './backend.js';

/** Copies between host addresses on parallel threads (the chunk copies of a staged transfer). */
export interface HostCopier {
  readonly threads: number;
  /** Copies `bytes` from `src` to `dst` (host addresses, already checked), split over the threads. */
  copy(dst: Address, src: Address, bytes: number): Promise<void>;
  /**
   * Many copies as one request (a gather into a chunk or a scatter out of it), split over the threads. The lists are
   * read before the call returns: the caller may reuse them at once.
   */
  copyMany?(dsts: ArrayLike<Address>, srcs: ArrayLike<Address>, sizes: ArrayLike<number>): Promise<void>;
  /**
   * Reads bytes `[offset, offset + bytes)` of the open file `fd` into host memory at `dst` on the threads (pread);
   * at least `need` bytes (default all) must be there. Where absent, the caller reads through its own means.
   * @throws GpuError IO_ERROR (rejects) for a failed read or a file that ends before `need`.
   */
  readFile?(fd: number, dst: Address, bytes: number, offset: number, need?: number): Promise<void>;
  /** Writes `bytes` of host memory at `src` to the open file `fd` at `offset` on the threads (pwrite). @throws IO_ERROR */
  writeFile?(fd: number, src: Address, bytes: number, offset: number): Promise<void>;
  /** Resolves once the threads are up (at once where there are none to start). */
  readonly ready?: Promise<void>;
  /** The share (0 to 1) of a file range's pages in the page cache, where it can be told (mincore). */
  cachedShare?(fd: number, offset: number, bytes: number): number | undefined;
  /** Drops a file range's clean pages from the page cache (posix_fadvise DONTNEED); false where that cannot be done. */
  dropCache?(fd: number, offset: number, bytes: number): boolean;
  /** Waits on this thread until the work already posted has finished (the threads keep running). */
  waitIdle?(): void;
  /** Whether pinHost works (the backend told the threads how its runtime pins memory). */
  readonly canPin?: boolean;
  /**
   * Portable pinned host memory allocated on a copier thread; free it with the backend's hostFree. `landed` is called
   * on the JS thread when the thread's answer is seen (by the copier's own wait, or by {@link poll}), before the
   * promise settles: a caller that polls can use the memory within the same turn.
   * @throws NATIVE (rejects)
   */
  pinHost?(bytes: number, landed?: (address: Address) => void): Promise<Address>;
  /** Settles, on this thread and now, the work the threads have finished (their promises settle as usual). */
  poll?(): void;
  /** Waits on this thread for the copies already started, refuses the rest, and stops the threads. Idempotent. */
  dispose(): void;
}

/** Where a batched copy's operand lives, as the batch call's location hints name it. */
export type BatchLocation = { type: 'device'; device: number } | { type: 'host' };

/**
 * A batch of copies for one native call: addresses and sizes as pairs of 32-bit halves (low, high) per copy, and
 * runs of copies that share their operands' locations (`first` is the index of a run's first copy).
 */
export interface NativeCopyBatch {
  count: number;
  dsts: Uint32Array;
  srcs: Uint32Array;
  sizes: Uint32Array;
  runs: ReadonlyArray<{ first: number; src: BatchLocation; dst: BatchLocation }>;
}

/** What the batch call did with a batch: which way the copies went, said in every copyBatch result. */
export interface BatchOutcome {
  /** 'batch': the runtime's batch call carried the copies; 'loop': one copy call each (the batch call was refused). */
  readonly path: 'batch' | 'loop';
  /** How the batch call was made: one attribute per run of copies, or none (ROCm 7.1 to 7.12 refuse any). */
  readonly attributes?: 'per-run' | 'none' | undefined;
  /** The most copies one batch call carries (HIP: 8192); larger batches take several calls. Absent: no limit. */
  readonly copiesPerCall?: number | undefined;
  /** Why the copies did not go the first way tried, when they did not. */
  readonly note?: string | undefined;
}
