/**
 * The part of the caching pool that deals in segments and blocks: where a block comes from (a free list, a new
 * segment, a growable segment grown and mapped), how it is cut (splitting) and put back (merging with free
 * neighbours, ordering streams with events), and how cached memory goes back upstream. CachingPool (caching-pool.ts)
 * puts the resource API, streams' pending frees and the statistics on top.
 */
import { OutOfMemoryError, InvalidArgumentError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import type { MemoryKind } from '../memory/allocation.js';
import { checkAlignment } from '../memory/validate.js';
import type { Stream } from '../stream/stream.js';
import { AddressMap } from './address-map.js';
import { BlockRecycler, Segment, type Block } from './blocks.js';
import { FreeLists } from './free-lists.js';
import type { GrowableSource } from './growable.js';
import { GrowableSegments } from './growable-segments.js';
import type { MemoryResource, StreamRef } from './memory-resource.js';
import { ResourceBase } from './resource-base.js';
import { Stat, type PoolStats } from './stats.js';
import { TraceRing } from './trace-ring.js';

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
  /** Size of the event ring read by snapshot() (default 0: off, as PyTorch records history only when asked). */
  traceEntries?: number;
}

/** Segments and blocks of a caching pool; see CachingPool. */
export abstract class PoolSegments extends ResourceBase {
  readonly kind: MemoryKind;
  readonly device: number | undefined;
  readonly backend: Backend | undefined;
  readonly upstream: MemoryResource | undefined;
  readonly growable: GrowableSource | undefined;

  protected readonly alignment: number;
  protected readonly smallSize: number;
  protected readonly smallSegmentBytes: number;
  protected readonly largeSegmentBytes: number;
  protected readonly largeRounding: number;
  protected readonly maxSplitBytes: number;
  protected readonly releaseThresholdBytes: number;
  protected readonly crossStream: boolean;
  protected readonly growing: GrowableSegments | undefined;

  protected readonly free: FreeLists;
  protected readonly blocks = new BlockRecycler();
  protected readonly live = new AddressMap<Block>();
  protected readonly segments = new Set<Segment>();
  protected readonly pending: Block[] = [];
  protected readonly trace: TraceRing;

  protected readonly requested = new Stat();
  protected readonly allocated = new Stat();
  protected readonly reserved = new Stat();
  protected readonly active = new Stat();
  protected readonly allocationCount = new Stat();
  protected readonly segmentCount = new Stat();
  protected cacheHits = 0;
  protected cacheMisses = 0;
  protected segmentAllocs = 0;
  protected segmentFrees = 0;
  protected crossStreamReuses = 0;
  protected ooms = 0;

  /** @throws InvalidArgumentError for bad options. */
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
    // The segments are the upstream's (or the growable source's) memory: the pool closes when it goes.
    this.standOn(upstream);
    options.growable?.onClose((why) => this.lose(why));
  }

  /** Current statistics (CachingPool's). */
  abstract stats(): PoolStats;

  /**
   * Orders stream `toKey` (the object `toRef` when it is a real stream) after the work of the stream that owns free
   * block `b`, so that `toKey` may use b's memory: an event recorded on the owner and waited on by `toKey`. Streams of
   * a simulated device need nothing. Answers false when they cannot be ordered (a destroyed stream, or no stream
   * object for one side).
   */
  protected orderAfter(b: Block, toKey: number, toRef: Stream | undefined): boolean {
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
  protected take(b: Block, size: number, requested: number, key: number, stream: StreamRef | undefined): void {
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
  protected segmentSize(small: boolean, size: number): number {
    if (small) return this.smallSegmentBytes;
    if (size < this.largeSegmentBytes / 2) return this.largeSegmentBytes;
    return Math.ceil(size / this.largeRounding) * this.largeRounding;
  }

  /** Gets memory for a request the cache cannot serve: a new segment, or a growable segment grown. */
  protected grow(small: boolean, key: number, size: number, requested: number): Block {
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
  protected poolOom(requested: number, key: number, cause: unknown): unknown {
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
  protected mapFor(block: Block, size: number, requested: number, key: number): void {
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
      // the block goes back as it came, joined again with the free neighbours it may have been cut from
      this.insertMerged(block);
      throw this.poolOom(requested, key, e);
    }
  }

  protected ensureMapped(seg: Segment, lo: number, hi: number): void {
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
  protected reclaimAll(keepLo = 0, keepHi = 0): number {
    let n = 0;
    for (const seg of this.segments) if (seg.growable) n += this.reclaim(seg, keepLo, keepHi);
    return n;
  }

  protected reclaim(seg: Segment, keepLo: number, keepHi: number): number {
    return this.growing!.unmapFree(seg, keepLo, keepHi, (at, bytes) => {
      this.reserved.sub(bytes);
      this.trace.record('segment_unmap', at, bytes, seg.stream);
    });
  }

  protected growOnce(small: boolean, key: number, size: number): Block {
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
  protected growGrowable(small: boolean, key: number, size: number): Block {
    const g = this.growing!;
    const seg = g.segment(small, key, (created) => {
      this.segments.add(created);
      this.segmentCount.add(1);
      this.segmentAllocs++;
      this.trace.record('segment_alloc', created.address, 0, key);
    });
    return g.extend(seg, key, size, this.free, this.blocks);
  }

  /** A block no stream uses any more: back to its free list, merged with free neighbours. `at`: the trace time, when the free completes in the call that requested it. */
  protected release(b: Block, at = -1): void {
    this.active.sub(b.size);
    this.trace.record('free_completed', b.userAddress, b.requested, b.stream, at);
    b.allocated = false;
    b.requested = 0;
    this.insertMerged(b);
    if (this.reserved.current - this.allocated.current > this.releaseThresholdBytes) this.releaseCached(this.releaseThresholdBytes);
  }

  /** Puts a free block on its free list, merged first with free neighbours it may join. */
  protected insertMerged(b: Block): void {
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
  }

  /** Returns whole free segments (and the free tail of growable segments) upstream until at most `keepBytes` of free memory is cached. Answers the bytes released. */
  protected releaseCached(keepBytes = 0): number {
    let released = 0;
    for (const seg of [...this.segments]) {
      if (this.reserved.current - this.allocated.current <= keepBytes) break;
      released += seg.growable ? this.reclaim(seg, 0, 0) : this.releaseSegment(seg);
    }
    return released;
  }

  protected releaseSegment(seg: Segment): number {
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
}
