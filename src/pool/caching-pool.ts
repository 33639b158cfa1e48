/**
 * CachingPool: the allocator real programs need. Memory comes from an upstream resource in segments, is cut into
 * blocks by best fit with splitting, and goes back to a per-stream free list on deallocate, coalescing with free
 * neighbours. A cache hit makes no native call and allocates no object.
 *
 * - Requests up to `smallSize` (1 MiB) come from small segments (2 MiB); larger ones from large segments (20 MiB
 *   for requests under 10 MiB, else the request rounded up to 2 MiB), as PyTorch's caching allocator does.
 * - Sizes are rounded to `alignment` (256 bytes by default, never below 128).
 * - Free lists are per stream. A block freed on stream A is reused on A at once; another stream B takes it only
 *   after an event recorded on A is made B's dependency. `recordStream(address, stream)` marks a block as used on
 *   another stream: its free then waits for an event on that stream before the block is reused.
 * - On out of memory the pool frees its cached segments and retries once, then throws OutOfMemoryError with its
 *   statistics and its largest free block. `trim()` and `releaseThresholdBytes` hand cached memory back.
 * - With a `growable` source the pool keeps one growable segment per stream and size class, in reserved address
 *   space, and maps physical memory in granules only under allocated blocks; before mapping beyond its earlier
 *   peak it unmaps granules that lie wholly in free blocks (the virtual memory API on a GPU).
 *
 * Stream-ordering rules: see memory-resource.ts.
 */
import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Stream } from '../stream/stream.js';
import { firstBlock, type Block } from './blocks.js';
import { snapshotSegments, type PoolSnapshot } from './snapshot.js';
import { streamKey, type AllocateOptions, type DeallocateOptions, type MemoryResource, type StreamRef } from './memory-resource.js';
import { type CachingPoolOptions, PoolSegments } from './pool-segments.js';
import { fragmentation, type PoolStats } from './stats.js';
import type { TraceEntry } from './trace-ring.js';

export type { CachingPoolOptions } from './pool-segments.js';
export type { PoolSnapshot, SnapshotBlock, SnapshotSegment } from './snapshot.js';

export class CachingPool extends PoolSegments {
  /**
   * @param upstream where segments come from (a source: DeviceResource, PinnedResource, SimulatedResource, ...);
   *   may be omitted when `options.growable` is given.
   * @throws InvalidArgumentError for bad options.
   */
  constructor(upstream: MemoryResource | undefined, options: CachingPoolOptions = {}) {
    super(upstream, options);
  }

  // ---- allocate -------------------------------------------------------------------------------------------

  /**
   * Allocates `bytes` on `stream` (default stream when absent).
   * @throws InvalidArgumentError, OutOfMemoryError (with the pool's statistics), DisposedError
   */
  allocate(bytes: number, options?: AllocateOptions): number {
    const alignment = this.checkAllocate(bytes, options, this.alignment);
    const stream = options?.stream;
    const key = streamKey(stream);
    const extra = alignment > this.alignment ? alignment - this.alignment : 0;
    const size = this.round(bytes) + extra;
    if (this.pending.length > 0) this.processPending();
    const small = size <= this.smallSize;
    let block = this.free.take(small, key, size);
    if (block) this.cacheHits++;
    else {
      block = this.crossStream ? this.steal(small, key, size, stream) : null;
      if (block) this.cacheHits++;
      else {
        this.cacheMisses++;
        block = this.grow(small, key, size, bytes);
      }
    }
    if (block.segment.growable) this.mapFor(block, size, bytes, key);
    this.take(block, size, bytes, key, stream);
    const user = extra === 0 ? block.address : Math.ceil(block.address / alignment) * alignment;
    block.userAddress = user;
    this.live.set(user, block);
    this.trace.record('alloc', user, bytes, key);
    return user;
  }

  /** Rounds a request to the pool's alignment. */
  private round(bytes: number): number {
    return Math.ceil(bytes / this.alignment) * this.alignment;
  }

  /** Takes a fitting free block of another stream, ordering this stream after the other's work. */
  private steal(small: boolean, key: number, size: number, stream: StreamRef | undefined): Block | null {
    const toRef = typeof stream === 'object' ? stream : undefined;
    const b = this.free.takeFromOther(small, key, size, (candidate) => this.orderAfter(candidate, key, toRef));
    if (b) this.crossStreamReuses++;
    return b;
  }

  // ---- deallocate -----------------------------------------------------------------------------------------

  /**
   * Returns a block to the pool. The pool is unchanged when the call is refused.
   * @throws DisposedError (DOUBLE_FREE), InvalidArgumentError (FOREIGN_ADDRESS, wrong size)
   */
  deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    this.assertOpen();
    const b = this.live.get(address);
    if (!b) throw this.notLive(address);
    if (bytes !== b.requested) {
      throw new InvalidArgumentError(
        `CachingPool: deallocate of 0x${address.toString(16)} with ${bytes} bytes, but ${b.requested} were allocated`,
        ErrorCode.INVALID_ARGUMENT,
      );
    }
    const stream = options?.stream;
    const key = streamKey(stream);
    this.live.delete(address);
    const at = this.trace.record('free_requested', address, bytes, key);
    if (key !== b.stream && typeof stream === 'object') (b.usedOn ??= []).push(stream);
    this.requested.sub(b.requested);
    this.allocated.sub(b.size);
    this.allocationCount.sub(1);
    if (b.usedOn && b.usedOn.length > 0) {
      b.allocated = false;
      b.events = b.usedOn.map((s) => s.owner.internalEvent(s.device).record(s));
      b.usedOn = null;
      this.pending.push(b);
      return;
    }
    this.release(b, at);
  }

  /** The error for an address that is not a live allocation: free memory of ours is a double free, anything else foreign. */
  private notLive(address: number): Error {
    const hex = `0x${address.toString(16)}`;
    for (const seg of this.segments) {
      if (address < seg.address || address >= seg.address + seg.size) continue;
      for (let b = firstBlock(seg); b; b = b.next) {
        if (address < b.address || address >= b.address + b.size) continue;
        if (!b.allocated) return new DisposedError(`CachingPool: double free of ${hex} (the memory is already free)`, ErrorCode.DOUBLE_FREE);
        break;
      }
      return new InvalidArgumentError(`CachingPool: ${hex} is inside an allocation of this pool but is not its start`, ErrorCode.FOREIGN_ADDRESS);
    }
    return new InvalidArgumentError(`CachingPool: ${hex} was not allocated by this pool`, ErrorCode.FOREIGN_ADDRESS);
  }

  /** Frees blocks whose other-stream events have completed. */
  private processPending(): void {
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const b = this.pending[i]!;
      if (!b.events!.every((e) => e.query())) continue;
      for (const e of b.events!) e[Symbol.dispose]();
      b.events = null;
      this.pending.splice(i, 1);
      this.release(b);
    }
  }

  /**
   * Marks the block at `address` as used by `stream` too: when it is freed, it is reused only after the work
   * enqueued on `stream` by then has completed.
   * @throws InvalidArgumentError (FOREIGN_ADDRESS) for an address that is not a live block of this pool.
   */
  recordStream(address: number, stream: Stream): void {
    this.assertOpen();
    const b = this.live.get(address);
    if (!b) throw new InvalidArgumentError(`recordStream: 0x${address.toString(16)} is not a live allocation of this pool`, ErrorCode.FOREIGN_ADDRESS);
    if (stream.handle === b.stream) return;
    (b.usedOn ??= []).push(stream);
  }

  // ---- giving memory back ---------------------------------------------------------------------------------

  /** Hands every cached (free) segment back to the upstream resource. Answers the bytes released. */
  trim(): number {
    this.assertOpen();
    if (this.pending.length > 0) this.processPending();
    return this.releaseCached(0);
  }

  // ---- visibility -----------------------------------------------------------------------------------------

  /** Peak of reserved bytes so far (cheaper than stats()). */
  get reservedPeakBytes(): number {
    return this.reserved.peak;
  }

  /** Current statistics. In a growable segment a free block counts only its mapped bytes. */
  stats(): PoolStats {
    const g = this.growing;
    const largest = this.free.largest(g ? (b) => (b.segment.growable ? g.backedBytes(b) : b.size) : undefined);
    const freeBytes = this.reserved.current - this.active.current;
    return {
      requestedBytes: this.requested.toJSON(),
      allocatedBytes: this.allocated.toJSON(),
      reservedBytes: this.reserved.toJSON(),
      activeBytes: this.active.toJSON(),
      inactiveSplitBytes: this.free.inactiveSplit.toJSON(),
      allocationCount: this.allocationCount.toJSON(),
      segmentCount: this.segmentCount.toJSON(),
      inactiveSplitCount: this.free.inactiveSplitCount.toJSON(),
      cacheHits: this.cacheHits,
      cacheMisses: this.cacheMisses,
      segmentAllocs: this.segmentAllocs,
      segmentFrees: this.segmentFrees,
      crossStreamReuses: this.crossStreamReuses,
      ooms: this.ooms,
      fragmentation: fragmentation(largest, freeBytes),
      largestFreeBlockBytes: largest,
      freeBytes,
    };
  }

  /** Segments and their blocks in the JSON shape of PyTorch's memory snapshot (torch.cuda.memory._snapshot()). */
  snapshot(): PoolSnapshot {
    return { segments: snapshotSegments(this.segments, this.device ?? 0), device_traces: [this.trace.entries()], allocator: 'gpumem.CachingPool' };
  }

  /** The events recorded so far (oldest first). */
  traceEntries(): TraceEntry[] {
    return this.trace.entries();
  }

  /**
   * Releases every segment, live blocks included. A second call does nothing, and so does a call after the
   * upstream or the runtime was disposed: that freed the segments already.
   */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    for (const b of this.pending) for (const e of b.events ?? []) e[Symbol.dispose]();
    if (!this.lost) this.releaseSegments();
    this.segments.clear();
    this.live.clear();
    this.pending.length = 0;
    this.markDisposed();
  }

  private releaseSegments(): void {
    for (const seg of this.segments) {
      if (seg.growable) this.growable!.release(seg.address, seg.reserved);
      else this.upstream!.deallocate(seg.address, seg.size, { stream: seg.stream === 0 ? undefined : seg.stream });
    }
  }
}
