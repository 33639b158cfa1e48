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
import { DisposedError, ErrorCode, InvalidArgumentError, OutOfMemoryError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import type { MemoryKind } from '../memory/allocation.js';
import { checkAlignment } from '../memory/validate.js';
import type { Stream } from '../stream/stream.js';
import { AddressMap } from './address-map.js';
import { BlockRecycler, firstBlock, Segment, type Block } from './blocks.js';
import { FreeLists } from './free-lists.js';
import type { GrowableSource } from './growable.js';
import { GrowableSegments } from './growable-segments.js';
import { snapshotSegments, type PoolSnapshot } from './snapshot.js';
import { streamKey, type AllocateOptions, type DeallocateOptions, type MemoryResource, type StreamRef } from './memory-resource.js';
import { ResourceBase } from './resource-base.js';
import { fragmentation, Stat, type PoolStats } from './stats.js';
import { TraceRing, type TraceEntry } from './trace-ring.js';

const MiB = 1024 * 1024;

export type { PoolSnapshot, SnapshotBlock, SnapshotSegment } from './snapshot.js';

export interface CachingPoolOptions {
  /** Rounding and alignment of every block (a power of two, at least 128; default 256). */
  alignment?: number;
  /** Largest request served from small segments (default 1 MiB). */
  smallSize?: number;
  /** Size of a small segment (default 2 MiB). */
  smallSegmentBytes?: number;
  /** Segment for large requests below half of it (default 20 MiB). */
  largeSegmentBytes?: number;
  /** Larger requests get a segment of their size rounded up to this (default 2 MiB). */
  largeRounding?: number;
  /** Blocks larger than this are never split (default: no limit), as PyTorch's max_split_size_mb. */
  maxSplitBytes?: number;
  /** When cached free memory exceeds this, whole free segments go back upstream at once (default: keep all). */
  releaseThresholdBytes?: number;
  /** Growable segments instead of fixed ones (needs the virtual memory API, or a simulated device). */
  growable?: GrowableSource;
  /** Growth step of growable segments (default 2 MiB for small, 20 MiB for large, rounded to the granularity). */
  growBytes?: { small?: number; large?: number };
  /** Reuse blocks freed on one stream for another (with an event). Default true. */
  crossStream?: boolean;
  /** Size of the event ring read by snapshot() (default 0: off, as PyTorch records history only when asked). */
  traceEntries?: number;
}

export class CachingPool extends ResourceBase {
  readonly kind: MemoryKind;
  readonly device: number | undefined;
  readonly backend: Backend | undefined;
  readonly upstream: MemoryResource | undefined;
  readonly growable: GrowableSource | undefined;

  private readonly alignment: number;
  private readonly smallSize: number;
  private readonly smallSegmentBytes: number;
  private readonly largeSegmentBytes: number;
  private readonly largeRounding: number;
  private readonly maxSplitBytes: number;
  private readonly releaseThresholdBytes: number;
  private readonly crossStream: boolean;
  private readonly growing: GrowableSegments | undefined;

  private readonly free: FreeLists;
  private readonly blocks = new BlockRecycler();
  private readonly live = new AddressMap<Block>();
  private readonly segments = new Set<Segment>();
  private readonly pending: Block[] = [];
  private readonly trace: TraceRing;

  private readonly requested = new Stat();
  private readonly allocated = new Stat();
  private readonly reserved = new Stat();
  private readonly active = new Stat();
  private readonly allocationCount = new Stat();
  private readonly segmentCount = new Stat();
  private cacheHits = 0;
  private cacheMisses = 0;
  private segmentAllocs = 0;
  private segmentFrees = 0;
  private crossStreamReuses = 0;
  private ooms = 0;

  /**
   * @param upstream where segments come from (a source: DeviceResource, PinnedResource, SimulatedResource, ...);
   *   may be omitted when `options.growable` is given.
   * @throws InvalidArgumentError for bad options.
   */
  constructor(upstream: MemoryResource | undefined, options: CachingPoolOptions = {}) {
    super();
    if (!upstream && !options.growable) throw new InvalidArgumentError('CachingPool needs an upstream resource or a growable source');
    this.upstream = upstream;
    this.growable = options.growable;
    this.kind = upstream?.kind ?? 'device';
    this.device = upstream?.device ?? options.growable?.device;
    this.backend = upstream?.backend ?? options.growable?.backend;
    this.alignment = checkAlignment(options.alignment ?? 256, 'CachingPool', 128);
    this.smallSize = options.smallSize ?? MiB;
    this.smallSegmentBytes = options.smallSegmentBytes ?? 2 * MiB;
    this.largeSegmentBytes = options.largeSegmentBytes ?? 20 * MiB;
    this.largeRounding = options.largeRounding ?? 2 * MiB;
    this.maxSplitBytes = options.maxSplitBytes ?? Number.POSITIVE_INFINITY;
    this.releaseThresholdBytes = options.releaseThresholdBytes ?? Number.POSITIVE_INFINITY;
    this.crossStream = options.crossStream ?? true;
    const gran = options.growable?.granularity ?? 1;
    const roundGran = (n: number): number => Math.max(gran, Math.ceil(n / gran) * gran);
    if (this.smallSegmentBytes < this.smallSize) throw new InvalidArgumentError('CachingPool: smallSegmentBytes must be at least smallSize');
    this.free = new FreeLists(this.maxSplitBytes);
    this.growing = options.growable
      ? new GrowableSegments(
          options.growable,
          { small: roundGran(options.growBytes?.small ?? this.smallSegmentBytes), large: roundGran(options.growBytes?.large ?? this.largeSegmentBytes) },
          this.device,
        )
      : undefined;
    this.trace = new TraceRing(options.traceEntries ?? 0);
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

  /**
   * Orders stream `toKey` (the object `toRef` when it is a real stream) after the work of the stream that owns free
   * block `b`, so that `toKey` may use b's memory: an event recorded on the owner and waited on by `toKey`. Streams of
   * a simulated device need nothing. Answers false when they cannot be ordered (a destroyed stream, or no stream
   * object for one side).
   */
  private orderAfter(b: Block, toKey: number, toRef: Stream | undefined): boolean {
    if (b.stream === toKey) return true;
    const real = toRef ?? b.streamRef;
    if (!real) return true;
    const from = b.streamRef ?? (b.stream === 0 ? real.owner.defaultStream(real.device) : undefined);
    const to = toRef ?? (toKey === 0 ? real.owner.defaultStream(real.device) : undefined);
    if (!from || !to || from.disposed || to.disposed) return false;
    const e = from.owner.internalEvent(from.device);
    e.record(from);
    to.waitEvent(e);
    e[Symbol.dispose]();
    return true;
  }

  /** Marks `b` allocated for `size` bytes, splitting off the rest when it is worth keeping. */
  private take(b: Block, size: number, requested: number, key: number, stream: StreamRef | undefined): void {
    const rest = b.size - size;
    if (rest >= this.alignment && b.size <= this.maxSplitBytes) {
      const r = this.blocks.take();
      r.segment = b.segment;
      r.stream = b.stream;
      r.address = b.address + size;
      r.size = rest;
      r.prev = b;
      r.next = b.next;
      if (b.next) b.next.prev = r;
      b.next = r;
      b.size = size;
      b.segment.blocks++;
      this.free.insert(r);
    }
    b.allocated = true;
    b.requested = requested;
    // The block now belongs to `key`: a stolen block changed owner once the steal ordered `key` after its old stream.
    b.stream = key;
    b.streamRef = typeof stream === 'object' ? stream : undefined;
    this.requested.add(requested);
    this.allocated.add(b.size);
    this.active.add(b.size);
    this.allocationCount.add(1);
  }

  /** Size of a new fixed segment for a request of `size` bytes. */
  private segmentSize(small: boolean, size: number): number {
    if (small) return this.smallSegmentBytes;
    if (size < this.largeSegmentBytes / 2) return this.largeSegmentBytes;
    return Math.ceil(size / this.largeRounding) * this.largeRounding;
  }

  /** Gets memory for a request the cache cannot serve: a new segment, or a growable segment grown. */
  private grow(small: boolean, key: number, size: number, requested: number): Block {
    try {
      return this.growOnce(small, key, size);
    } catch (e) {
      if (!(e instanceof OutOfMemoryError)) throw e;
      this.releaseCached();
      try {
        return this.growOnce(small, key, size);
      } catch (e2) {
        throw this.poolOom(requested, key, e2);
      }
    }
  }

  /** The OutOfMemoryError the pool throws once freeing its cache did not help; other errors pass through. */
  private poolOom(requested: number, key: number, cause: unknown): unknown {
    if (!(cause instanceof OutOfMemoryError)) return cause;
    this.ooms++;
    this.trace.record('oom', 0, requested, key);
    const stats = this.stats();
    return new OutOfMemoryError(
      `out of memory: the pool could not allocate ${requested} bytes (${stats.reservedBytes.current} bytes reserved, ${stats.allocatedBytes.current} allocated, largest free block ${stats.largestFreeBlockBytes}): ${cause.message}`,
      {
        requestedBytes: requested,
        device: this.device,
        freeBytes: cause.freeBytes,
        totalBytes: cause.totalBytes,
        poolStats: stats as unknown as Record<string, unknown>,
        largestFreeBlockBytes: stats.largestFreeBlockBytes,
      },
      { backend: this.backend?.name, cause },
    );
  }

  /**
   * Growable segments map physical memory only under allocated blocks: maps the granules a block needs, first
   * unmapping free granules elsewhere when mapping would lift reserved memory above its earlier peak. On out of
   * memory the whole cache is released and the mapping retried once.
   */
  private mapFor(block: Block, size: number, requested: number, key: number): void {
    const seg = block.segment;
    try {
      this.ensureMapped(seg, block.address, block.address + size);
      return;
    } catch (e) {
      if (!(e instanceof OutOfMemoryError)) throw e;
    }
    this.free.insert(block);
    this.releaseCached();
    this.free.remove(block);
    try {
      this.ensureMapped(seg, block.address, block.address + size);
    } catch (e) {
      this.free.insert(block);
      throw this.poolOom(requested, key, e);
    }
  }

  private ensureMapped(seg: Segment, lo: number, hi: number): void {
    const g = this.growing!;
    const missing = g.missing(seg, lo, hi);
    if (missing === 0) return;
    if (this.reserved.current + missing * g.granularity > this.reserved.peak) this.reclaimAll(lo, hi);
    g.map(seg, lo, hi, (at, bytes) => {
      this.reserved.add(bytes);
      this.trace.record('segment_map', at, bytes, seg.stream);
    });
  }

  /** Unmaps the granules that lie wholly in free blocks of every growable segment, except those under [keepLo, keepHi). */
  private reclaimAll(keepLo = 0, keepHi = 0): number {
    let n = 0;
    for (const seg of this.segments) if (seg.growable) n += this.reclaim(seg, keepLo, keepHi);
    return n;
  }

  private reclaim(seg: Segment, keepLo: number, keepHi: number): number {
    return this.growing!.unmapFree(seg, keepLo, keepHi, (at, bytes) => {
      this.reserved.sub(bytes);
      this.trace.record('segment_unmap', at, bytes, seg.stream);
    });
  }

  private growOnce(small: boolean, key: number, size: number): Block {
    if (this.growing) return this.growGrowable(small, key, size);
    const segSize = this.segmentSize(small, size);
    const address = this.upstream!.allocate(segSize, { stream: key === 0 ? undefined : key });
    const seg = new Segment(address, segSize, key, small, false, segSize);
    const b = this.blocks.take();
    b.segment = seg;
    b.stream = key;
    b.address = address;
    b.size = segSize;
    seg.head = b;
    seg.blocks = 1;
    this.segments.add(seg);
    this.reserved.add(segSize);
    this.segmentCount.add(1);
    this.segmentAllocs++;
    this.trace.record('segment_alloc', address, segSize, key);
    return b;
  }

  /**
   * Extends the address space of the growable segment of this stream and size class (creating it on first use)
   * until a block of `size` fits at its end. Physical memory is mapped later, under the block, by mapFor.
   */
  private growGrowable(small: boolean, key: number, size: number): Block {
    const g = this.growing!;
    const seg = g.segment(small, key, (created) => {
      this.segments.add(created);
      this.segmentCount.add(1);
      this.segmentAllocs++;
      this.trace.record('segment_alloc', created.address, 0, key);
    });
    return g.extend(seg, key, size, this.free, this.blocks);
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

  /** A block no stream uses any more: back to its free list, merged with free neighbours. `at`: the trace time, when the free completes in the call that requested it. */
  private release(b: Block, at = -1): void {
    this.active.sub(b.size);
    this.trace.record('free_completed', b.userAddress, b.requested, b.stream, at);
    b.allocated = false;
    b.requested = 0;
    const seg = b.segment;
    // A free neighbour of another stream merges once this stream is ordered after that one (an event, on a GPU).
    const prev = b.prev;
    if (prev && !prev.allocated && prev.inTree && prev.events === null && (prev.stream === b.stream || this.orderAfter(prev, b.stream, b.streamRef))) {
      this.free.remove(prev);
      prev.stream = b.stream;
      prev.streamRef = b.streamRef;
      prev.size += b.size;
      prev.next = b.next;
      if (b.next) b.next.prev = prev;
      seg.blocks--;
      this.blocks.give(b);
      b = prev;
    }
    const next = b.next;
    if (next && !next.allocated && next.inTree && next.events === null && (next.stream === b.stream || this.orderAfter(next, b.stream, b.streamRef))) {
      this.free.remove(next);
      b.size += next.size;
      b.next = next.next;
      if (next.next) next.next.prev = b;
      seg.blocks--;
      this.blocks.give(next);
    }
    this.free.insert(b);
    if (this.reserved.current - this.allocated.current > this.releaseThresholdBytes) this.releaseCached(this.releaseThresholdBytes);
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

  /** Returns whole free segments (and the free tail of growable segments) upstream until at most `keepBytes` of free memory is cached. Answers the bytes released. */
  private releaseCached(keepBytes = 0): number {
    let released = 0;
    for (const seg of [...this.segments]) {
      if (this.reserved.current - this.allocated.current <= keepBytes) break;
      released += seg.growable ? this.reclaim(seg, 0, 0) : this.releaseSegment(seg);
    }
    return released;
  }

  private releaseSegment(seg: Segment): number {
    const b = seg.head;
    if (seg.blocks !== 1 || b.allocated || !b.inTree || b.events !== null) return 0;
    this.free.remove(b);
    this.upstream!.deallocate(seg.address, seg.size, { stream: seg.stream === 0 ? undefined : seg.stream });
    this.segments.delete(seg);
    this.reserved.sub(seg.size);
    this.segmentCount.sub(1);
    this.segmentFrees++;
    this.trace.record('segment_free', seg.address, seg.size, seg.stream);
    this.blocks.give(b);
    return seg.size;
  }

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

  /** Releases every segment, live blocks included. A second call does nothing. */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    for (const b of this.pending) for (const e of b.events ?? []) e[Symbol.dispose]();
    for (const seg of this.segments) {
      if (seg.growable) this.growable!.release(seg.address, seg.reserved);
      else this.upstream!.deallocate(seg.address, seg.size, { stream: seg.stream === 0 ? undefined : seg.stream });
    }
    this.segments.clear();
    this.live.clear();
    this.disposed = true;
  }
}
