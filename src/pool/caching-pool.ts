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
 * - With a `growable` source the pool keeps one growable segment per stream and size class and maps memory into
 *   it as it grows, instead of adding segments (the virtual memory API on a GPU).
 *
 * Stream-ordering rules: see memory-resource.ts.
 */
import { DisposedError, ErrorCode, InvalidArgumentError, OutOfMemoryError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import type { MemoryKind } from '../memory/allocation.js';
import { checkAlignment } from '../memory/validate.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import { BlockTree, type TreeNode } from './block-tree.js';
import type { GrowableSource } from './growable.js';
import { streamKey, type AllocateOptions, type DeallocateOptions, type MemoryResource, type StreamRef } from './memory-resource.js';
import { ResourceBase } from './resource-base.js';
import { fragmentation, Stat, type PoolStats } from './stats.js';
import { TraceRing, type TraceEntry } from './trace-ring.js';

const MiB = 1024 * 1024;

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
  /** Size of the event ring read by snapshot() (default 8192; 0 turns tracing off). */
  traceEntries?: number;
}

class Segment {
  head!: Block;
  blocks = 0;
  /** Bytes mapped, for a growable segment (which reserves more address space than it maps). */
  mapped = 0;
  constructor(
    readonly address: number,
    public size: number,
    readonly stream: number,
    readonly small: boolean,
    readonly growable: boolean,
    /** Address space reserved (growable segments). */
    readonly reserved: number,
  ) {}
}

class Block implements TreeNode {
  size = 0;
  address = 0;
  left: TreeNode | null = null;
  right: TreeNode | null = null;
  priority = 0;
  requested = 0;
  segment!: Segment;
  prev: Block | null = null;
  next: Block | null = null;
  allocated = false;
  inTree = false;
  stream = 0;
  /** The Stream object of the stream it was allocated on, when real (for events). */
  streamRef: Stream | undefined = undefined;
  /** Streams, other than its own, that used the block (recordStream). */
  usedOn: Stream[] | null = null;
  events: GpuEvent[] | null = null;
  /** Address handed out (differs from `address` when a larger alignment was asked for). */
  userAddress = 0;
}

type FreeLists = Map<number, BlockTree<Block>>;

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
  private readonly growSmall: number;
  private readonly growLarge: number;

  private readonly smallFree: FreeLists = new Map();
  private readonly largeFree: FreeLists = new Map();
  private readonly live = new Map<number, Block>();
  private readonly segments = new Set<Segment>();
  private readonly growing = new Map<string, Segment>();
  private readonly pending: Block[] = [];
  private readonly recentlyFreed = new Set<number>();
  private readonly spare: Block[] = [];
  private readonly trace: TraceRing;

  private readonly requested = new Stat();
  private readonly allocated = new Stat();
  private readonly reserved = new Stat();
  private readonly active = new Stat();
  private readonly inactiveSplit = new Stat();
  private readonly allocationCount = new Stat();
  private readonly segmentCount = new Stat();
  private readonly inactiveSplitCount = new Stat();
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
    this.growSmall = roundGran(options.growBytes?.small ?? this.smallSegmentBytes);
    this.growLarge = roundGran(options.growBytes?.large ?? this.largeSegmentBytes);
    if (this.smallSegmentBytes < this.smallSize) throw new InvalidArgumentError('CachingPool: smallSegmentBytes must be at least smallSize');
    this.trace = new TraceRing(options.traceEntries ?? 8192);
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
    let block = this.findFree(small, key, size);
    if (block) this.cacheHits++;
    else {
      block = this.crossStream ? this.steal(small, key, size, stream) : null;
      if (block) this.cacheHits++;
      else {
        this.cacheMisses++;
        block = this.grow(small, key, size, bytes);
      }
    }
    this.take(block, size, bytes, key, stream);
    const user = extra === 0 ? block.address : Math.ceil(block.address / alignment) * alignment;
    block.userAddress = user;
    this.live.set(user, block);
    this.recentlyFreed.delete(user);
    this.trace.record('alloc', user, bytes, key);
    return user;
  }

  /** Rounds a request to the pool's alignment. */
  private round(bytes: number): number {
    return Math.ceil(bytes / this.alignment) * this.alignment;
  }

  private lists(small: boolean): FreeLists {
    return small ? this.smallFree : this.largeFree;
  }

  private tree(small: boolean, key: number): BlockTree<Block> {
    const lists = this.lists(small);
    let t = lists.get(key);
    if (!t) {
      t = new BlockTree<Block>();
      lists.set(key, t);
    }
    return t;
  }

  private findFree(small: boolean, key: number, size: number): Block | null {
    const t = this.lists(small).get(key);
    if (!t || t.size === 0) return null;
    const b = t.lowerBound(size);
    if (!b) return null;
    // An unsplittable (oversize) block serves only requests that are themselves oversize, as in PyTorch.
    if (b.size > this.maxSplitBytes && size < this.maxSplitBytes) return null;
    this.unlinkFree(t, b);
    return b;
  }

  /** Takes a fitting free block of another stream, ordering this stream after the other's work. */
  private steal(small: boolean, key: number, size: number, stream: StreamRef | undefined): Block | null {
    for (const [other, t] of this.lists(small)) {
      if (other === key || t.size === 0) continue;
      const b = t.lowerBound(size);
      if (!b || (b.size > this.maxSplitBytes && size < this.maxSplitBytes)) continue;
      let from = b.streamRef;
      if (!from && other === 0 && typeof stream === 'object') from = stream.owner.defaultStream(stream.device);
      if (from && stream !== undefined && typeof stream !== 'number') {
        const e = from.owner.internalEvent(from.device);
        e.record(from);
        stream.waitEvent(e);
        e[Symbol.dispose]();
      } else if (from && (stream === undefined || typeof stream === 'number')) {
        // Without a stream object to wait on, the default stream would need a device synchronisation: skip.
        continue;
      }
      this.unlinkFree(t, b);
      this.crossStreamReuses++;
      return b;
    }
    return null;
  }

  private unlinkFree(t: BlockTree<Block>, b: Block): void {
    t.remove(b);
    b.inTree = false;
    if (b.segment.blocks > 1) {
      this.inactiveSplit.sub(b.size);
      this.inactiveSplitCount.sub(1);
    }
  }

  private insertFree(b: Block): void {
    this.tree(b.segment.small, b.segment.stream).insert(b);
    b.inTree = true;
    if (b.segment.blocks > 1) {
      this.inactiveSplit.add(b.size);
      this.inactiveSplitCount.add(1);
    }
  }

  /** Marks `b` allocated for `size` bytes, splitting off the rest when it is worth keeping. */
  private take(b: Block, size: number, requested: number, key: number, stream: StreamRef | undefined): void {
    const rest = b.size - size;
    if (rest >= this.alignment && b.size <= this.maxSplitBytes) {
      const r = this.newBlock();
      r.segment = b.segment;
      r.address = b.address + size;
      r.size = rest;
      r.prev = b;
      r.next = b.next;
      if (b.next) b.next.prev = r;
      b.next = r;
      b.size = size;
      b.segment.blocks++;
      this.insertFree(r);
    }
    b.allocated = true;
    b.requested = requested;
    b.stream = b.segment.stream;
    b.streamRef = typeof stream === 'object' ? stream : undefined;
    if (b.stream !== key) {
      // A stolen block now serves `key`; record its use there so a later free waits for that stream.
      if (typeof stream === 'object') (b.usedOn ??= []).push(stream);
    }
    this.requested.add(requested);
    this.allocated.add(b.size);
    this.active.add(b.size);
    this.allocationCount.add(1);
  }

  private newBlock(): Block {
    const b = this.spare.pop() ?? new Block();
    b.left = b.right = null;
    b.prev = b.next = null;
    b.allocated = false;
    b.inTree = false;
    b.requested = 0;
    b.usedOn = null;
    b.events = null;
    b.streamRef = undefined;
    return b;
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
        if (!(e2 instanceof OutOfMemoryError)) throw e2;
        this.ooms++;
        this.trace.record('oom', 0, requested, key);
        const stats = this.stats();
        throw new OutOfMemoryError(
          `out of memory: the pool could not allocate ${requested} bytes (${stats.reservedBytes.current} bytes reserved, ${stats.allocatedBytes.current} allocated, largest free block ${stats.largestFreeBlockBytes}): ${e2.message}`,
          {
            requestedBytes: requested,
            device: this.device,
            freeBytes: e2.freeBytes,
            totalBytes: e2.totalBytes,
            poolStats: stats as unknown as Record<string, unknown>,
            largestFreeBlockBytes: stats.largestFreeBlockBytes,
          },
          { backend: this.backend?.name, cause: e2 },
        );
      }
    }
  }

  private growOnce(small: boolean, key: number, size: number): Block {
    if (this.growable) return this.growGrowable(small, key, size);
    const segSize = this.segmentSize(small, size);
    const address = this.upstream!.allocate(segSize, { stream: key === 0 ? undefined : key });
    const seg = new Segment(address, segSize, key, small, false, segSize);
    const b = this.newBlock();
    b.segment = seg;
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

  /** Grows (or creates) the growable segment of this stream and size class until a block of `size` fits at its end. */
  private growGrowable(small: boolean, key: number, size: number): Block {
    const g = this.growable!;
    const id = `${key}:${small ? 's' : 'l'}`;
    let seg = this.growing.get(id);
    if (!seg) {
      const address = g.reserve(g.reserveBytes);
      seg = new Segment(address, 0, key, small, true, g.reserveBytes);
      this.growing.set(id, seg);
      this.segments.add(seg);
      this.segmentCount.add(1);
      this.segmentAllocs++;
      this.trace.record('segment_alloc', address, 0, key);
    }
    // The last block, if free, is extended; otherwise a new block starts at the mapped end.
    let last: Block | null = seg.blocks > 0 ? seg.head : null;
    while (last?.next) last = last.next;
    const tailFree = last && !last.allocated && last.inTree ? last.size : 0;
    const step = small ? this.growSmall : this.growLarge;
    const need = size - tailFree;
    const bytes = Math.max(step, Math.ceil(need / g.granularity) * g.granularity);
    if (seg.mapped + bytes > seg.reserved) {
      throw new OutOfMemoryError(`the growable segment's reserved address space (${seg.reserved} bytes) is exhausted`, { requestedBytes: size, device: this.device });
    }
    g.map(seg.address + seg.mapped, bytes);
    this.trace.record('segment_map', seg.address + seg.mapped, bytes, key);
    seg.mapped += bytes;
    seg.size = seg.mapped;
    this.reserved.add(bytes);
    let b: Block;
    if (last && tailFree > 0) {
      this.unlinkFree(this.tree(small, key), last);
      last.size += bytes;
      b = last;
    } else {
      b = this.newBlock();
      b.segment = seg;
      b.address = seg.address + seg.mapped - bytes;
      b.size = bytes;
      if (last) {
        last.next = b;
        b.prev = last;
      } else seg.head = b;
      seg.blocks++;
    }
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
    if (!b) {
      if (this.recentlyFreed.has(address)) throw new DisposedError(`CachingPool: double free of 0x${address.toString(16)}`, ErrorCode.DOUBLE_FREE);
      throw new InvalidArgumentError(`CachingPool: 0x${address.toString(16)} was not allocated by this pool`, ErrorCode.FOREIGN_ADDRESS);
    }
    if (bytes !== b.requested) {
      throw new InvalidArgumentError(`CachingPool: deallocate of 0x${address.toString(16)} with ${bytes} bytes, but ${b.requested} were allocated`, ErrorCode.INVALID_ARGUMENT);
    }
    const stream = options?.stream;
    const key = streamKey(stream);
    this.live.delete(address);
    this.rememberFreed(address);
    this.trace.record('free_requested', address, bytes, key);
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
    this.release(b);
  }

  private rememberFreed(address: number): void {
    this.recentlyFreed.add(address);
    if (this.recentlyFreed.size > 65536) this.recentlyFreed.delete(this.recentlyFreed.values().next().value as number);
  }

  /** A block no stream uses any more: back to its free list, merged with free neighbours. */
  private release(b: Block): void {
    this.active.sub(b.size);
    this.trace.record('free_completed', b.userAddress, b.requested, b.stream);
    b.allocated = false;
    b.requested = 0;
    b.streamRef = undefined;
    const seg = b.segment;
    const t = this.tree(seg.small, seg.stream);
    const prev = b.prev;
    if (prev && !prev.allocated && prev.inTree && prev.events === null) {
      this.unlinkFree(t, prev);
      prev.size += b.size;
      prev.next = b.next;
      if (b.next) b.next.prev = prev;
      seg.blocks--;
      this.spare.push(b);
      b = prev;
    }
    const next = b.next;
    if (next && !next.allocated && next.inTree && next.events === null) {
      this.unlinkFree(t, next);
      b.size += next.size;
      b.next = next.next;
      if (next.next) next.next.prev = b;
      seg.blocks--;
      this.spare.push(next);
    }
    this.insertFree(b);
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
      released += seg.growable ? this.shrinkGrowable(seg) : this.releaseSegment(seg);
    }
    return released;
  }

  private releaseSegment(seg: Segment): number {
    const b = seg.head;
    if (seg.blocks !== 1 || b.allocated || !b.inTree || b.events !== null) return 0;
    this.unlinkFree(this.tree(seg.small, seg.stream), b);
    this.upstream!.deallocate(seg.address, seg.size, { stream: seg.stream === 0 ? undefined : seg.stream });
    this.segments.delete(seg);
    this.reserved.sub(seg.size);
    this.segmentCount.sub(1);
    this.segmentFrees++;
    this.trace.record('segment_free', seg.address, seg.size, seg.stream);
    this.spare.push(b);
    return seg.size;
  }

  /** Unmaps the free memory at the end of a growable segment, in whole mapped chunks. */
  private shrinkGrowable(seg: Segment): number {
    let last: Block | null = seg.head;
    while (last?.next) last = last.next;
    if (!last || last.allocated || !last.inTree || last.events !== null) return 0;
    const g = this.growable!;
    const firstPage = Math.ceil((last.address - seg.address) / g.granularity) * g.granularity;
    const released = g.unmap(seg.address + firstPage, seg.mapped - firstPage);
    if (released === 0) return 0;
    const t = this.tree(seg.small, seg.stream);
    this.unlinkFree(t, last);
    seg.mapped -= released;
    seg.size = seg.mapped;
    last.size -= released;
    this.reserved.sub(released);
    this.trace.record('segment_unmap', seg.address + seg.mapped, released, seg.stream);
    if (last.size > 0) this.insertFree(last);
    else {
      if (last.prev) last.prev.next = null;
      seg.blocks--;
      this.spare.push(last);
    }
    return released;
  }

  /** Hands every cached (free) segment back to the upstream resource. Answers the bytes released. */
  trim(): number {
    this.assertOpen();
    if (this.pending.length > 0) this.processPending();
    return this.releaseCached(0);
  }

  // ---- visibility -----------------------------------------------------------------------------------------

  /** Current statistics. */
  stats(): PoolStats {
    let largest = 0;
    for (const lists of [this.smallFree, this.largeFree]) {
      for (const t of lists.values()) largest = Math.max(largest, t.max()?.size ?? 0);
    }
    const freeBytes = this.reserved.current - this.active.current;
    return {
      requestedBytes: this.requested.toJSON(),
      allocatedBytes: this.allocated.toJSON(),
      reservedBytes: this.reserved.toJSON(),
      activeBytes: this.active.toJSON(),
      inactiveSplitBytes: this.inactiveSplit.toJSON(),
      allocationCount: this.allocationCount.toJSON(),
      segmentCount: this.segmentCount.toJSON(),
      inactiveSplitCount: this.inactiveSplitCount.toJSON(),
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
    const segments: SnapshotSegment[] = [];
    for (const seg of this.segments) {
      const blocks: SnapshotBlock[] = [];
      let allocated = 0;
      let active = 0;
      let requested = 0;
      for (let b: Block | null = seg.blocks > 0 ? seg.head : null; b; b = b.next) {
        const state = b.allocated ? 'active_allocated' : b.events !== null ? 'active_pending_free' : 'inactive';
        blocks.push({ address: b.address, size: b.size, requested_size: b.requested, state, stream: b.stream });
        if (b.allocated) {
          allocated += b.size;
          requested += b.requested;
        }
        if (b.allocated || b.events !== null) active += b.size;
      }
      segments.push({
        device: this.device ?? 0,
        address: seg.address,
        total_size: seg.size,
        allocated_size: allocated,
        active_size: active,
        requested_size: requested,
        stream: seg.stream,
        segment_type: seg.small ? 'small' : 'large',
        is_expandable: seg.growable,
        blocks,
      });
    }
    return { segments, device_traces: [this.trace.entries()], allocator: 'gpumem.CachingPool' };
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

/** One block in a snapshot. */
export interface SnapshotBlock {
  address: number;
  size: number;
  requested_size: number;
  state: 'active_allocated' | 'active_pending_free' | 'inactive';
  stream: number;
}

/** One segment in a snapshot (PyTorch's field names). */
export interface SnapshotSegment {
  device: number;
  address: number;
  total_size: number;
  allocated_size: number;
  active_size: number;
  requested_size: number;
  stream: number;
  segment_type: 'small' | 'large';
  is_expandable: boolean;
  blocks: SnapshotBlock[];
}

export interface PoolSnapshot {
  segments: SnapshotSegment[];
  device_traces: TraceEntry[][];
  allocator: string;
}
