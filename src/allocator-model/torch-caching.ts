/**
 * PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the native backend) as a model that the
 * planner replays a training or generation step through, and that `pool replay`'s pytorch configurations are, to know
 * what max_memory_reserved() reports rather than add a flat allowance. The rules it follows by default:
 *
 * - every request is rounded up to 512 bytes; requests of at most 1 MiB come from the small pool, whose segments are
 *   2 MiB; larger ones from the large pool, whose segments are 20 MiB for requests under 10 MiB and the request
 *   rounded up to 2 MiB otherwise (kSmallSize, kSmallBuffer, kMinLargeAlloc, kLargeBuffer, kRoundLarge);
 * - a request takes the smallest cached free block of its pool that holds it (best fit, then the lowest address:
 *   BlockComparatorSize orders by stream, size, then pointer), so which of two equal blocks is taken depends on where
 *   cudaMalloc put their segments. Each new segment is placed below every earlier one: the driver hands out lower
 *   virtual addresses as a process allocates (seen on one H200 with CUDA 13, 2026-12-04: replaying a recorded trace of
 *   Hugging Face generate, Pythia-1.4B 8 x 1024 tokens, reproduces its 456 cudaMalloc calls and 21.69 GiB reserved
 *   with descending addresses and 419 calls, 20.06 GiB with ascending ones; docs/plan-accuracy.md);
 *   the rest of the block is split off when it is at least 512 bytes (small pool) or more than 1 MiB (large pool),
 *   else the whole block is handed out and counted as allocated;
 * - a freed block merges with its free neighbours in the same segment only: blocks never merge across segments, so
 *   memory freed in one segment cannot serve a request larger than that segment's free run;
 * - a block belongs to the stream it was allocated on and is reused only by that stream (FSDP's all-gather and
 *   reduce-scatter streams keep pools of their own);
 * - segments are only returned by empty_cache() or when cudaMalloc fails (release_cached_blocks, then one retry), so
 *   reserved memory only grows within a run that fits.
 *
 * PYTORCH_CUDA_ALLOC_CONF (alloc-conf.ts) changes these as the allocator does:
 * - `expandable_segments:True`: one segment per stream and pool, grown by mapping 2 MiB (small) or 20 MiB (large)
 *   pages as far as the blocks reach (try_allocate_expandable_block, ExpandableSegment::map); a free block at the
 *   segment's end counts as the size it can grow to, so it is taken last; any rest of at least 512 bytes is split;
 *   freeing never unmaps, empty_cache() and a failed mapping unmap the pages nothing lives on;
 * - `max_split_size_mb`: large blocks of at least that size are never split, are not handed to smaller requests, and
 *   serve a request of at least that size only when less than max_non_split_rounding_mb larger (get_free_block); a
 *   failed cudaMalloc first frees such cached blocks of the stream, largest first (release_available_cached_blocks);
 * - `roundup_power2_divisions`: requests rounded to the next division of their power-of-two interval (round_size);
 * - `garbage_collection_threshold` with a memory fraction (set_per_process_memory_fraction): before cudaMalloc, whole
 *   free large segments no younger than the average are freed until reserved falls to threshold x allowed
 *   (garbage_collect_cached_blocks); the fraction itself caps reserved memory.
 *
 * gpumem's own CachingPool (pool/caching-pool.ts) is a real allocator with its own choices (256-byte rounding, a
 * block split whenever the rest is worth one alignment, streams and events); this model keeps PyTorch's figures.
 */
import { type AllocConf, DEFAULT_ALLOC_CONF, roundRequest } from './alloc-conf.js';

const MiB = 1024 * 1024;
const MIN_BLOCK = 512;
const SMALL_SIZE = MiB;
const SMALL_BUFFER = 2 * MiB;
const MIN_LARGE_ALLOC = 10 * MiB;
const LARGE_BUFFER = 20 * MiB;
const ROUND_LARGE = 2 * MiB;
/** Address space set aside for each expandable segment (PyTorch reserves 1⅛ x the device; any large span will do). */
const EXPANDABLE_SPAN = 2 ** 40;

interface Block {
  address: number;
  size: number;
  segment: Segment;
  stream: number;
  small: boolean;
  free: boolean;
  prev: Block | undefined;
  next: Block | undefined;
  /** The pool's get_free_block count when the block was last freed (its age for garbage collection). */
  freedAt: number;
}

/** A segment: one cudaMalloc, or (expandable) one address range whose pages are mapped as blocks reach them. */
interface Segment {
  id: number;
  stream: number;
  small: boolean;
  /** Bytes this segment holds of reserved memory (its size, or its mapped pages). */
  reserved: number;
  /** Expandable segments only. */
  grow?: Growth;
}

/** An expandable segment's range: where its unused end begins, its highest block, and per page whether it is mapped and how many live blocks touch it. */
interface Growth {
  base: number;
  end: number;
  last: Block | undefined;
  page: number;
  mapped: Uint8Array;
  live: Int32Array;
}

/** The request size PyTorch's allocator rounds to by default. */
export const roundSize = (bytes: number): number => roundRequest(bytes);

/** The segment cudaMalloc is asked for when no cached block holds a request of `size` (rounded) bytes. */
export function segmentSize(size: number): number {
  if (size <= SMALL_SIZE) return SMALL_BUFFER;
  if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return Math.ceil(size / ROUND_LARGE) * ROUND_LARGE;
}

/** Free blocks of one pool, ordered by size then address, as the allocator's std::set is. */
class FreeBlocks {
  readonly items: Block[] = [];
  /** get_free_block calls on this pool (ages blocks for garbage collection). */
  calls = 0;

  private index(size: number, address: number): number {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const b = this.items[mid]!;
      if (b.size < size || (b.size === size && b.address < address)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(b: Block): void {
    b.freedAt = this.calls;
    this.items.splice(this.index(b.size, b.address), 0, b);
  }

  remove(b: Block): void {
    const i = this.index(b.size, b.address);
    if (this.items[i] !== b) throw new Error('torch-allocator: free block not found');
    this.items.splice(i, 1);
  }

  /** The smallest block of at least `size` bytes (the lowest address among equals), or undefined. */
  bestFit(size: number): Block | undefined {
    return this.items[this.index(size, -1)];
  }

  largest(): number {
    return this.items.at(-1)?.size ?? 0;
  }
}

/** Peaks as torch.cuda.max_memory_allocated() and max_memory_reserved() report them, and the current figures. */
export interface AllocatorStats {
  allocatedBytes: number;
  reservedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** Segments held now (an expandable segment counts once). */
  segments: number;
  /** cudaMalloc calls, and for expandable segments the mappings of new pages (segment_alloc / segment_map events). */
  segmentAllocs: number;
  /** The largest run of free reserved memory one request could take now. */
  largestFreeBytes: number;
}

/** What the model is given: the room cudaMalloc has, and the allocator's settings. */
export interface TorchAllocatorOptions {
  /** What cudaMalloc can hand out (the device less what lies outside the allocator); undefined: no limit. */
  capacityBytes?: number | undefined;
  /** PYTORCH_CUDA_ALLOC_CONF's settings (default: none set). */
  conf?: AllocConf | undefined;
  /**
   * torch.cuda.set_per_process_memory_fraction as bytes (fraction x device memory): reserved memory stays under it,
   * and it turns garbage_collection_threshold on. Undefined: not set.
   */
  fractionBytes?: number | undefined;
}

/** The caching allocator of one device, replaying allocations and frees by handle (on stream 0 unless told). */
export class TorchAllocatorModel {
  private readonly pools = new Map<string, FreeBlocks>();
  private readonly live = new Map<number, Block>();
  private readonly segmentsHeld = new Set<Segment>();
  private readonly expandable = new Map<string, Segment>();
  private readonly conf: AllocConf;
  private readonly limit: number;
  /** Reserved bytes garbage collection brings memory down to (threshold x allowed), when it is on. */ private nextHandle = 1;
  /** Where the next segment ends: segments are placed downwards from here (see the class comment). */
  private nextAddress = 2 ** 52;
  private nextSegment = 0;
  private allocated = 0;
  private reserved = 0;
  private peakAllocated = 0;
  private peakReserved = 0;
  private segmentAllocs = 0;
  /** A request found no room even after the cache was released (PyTorch would raise OutOfMemoryError). */
  outOfMemory = false;

  /** `options`: the capacity in bytes alone, or the capacity and the allocator's settings. */
  constructor(options: number | TorchAllocatorOptions = {}) {
    const o = typeof options === 'number' ? { capacityBytes: options } : options;
    this.conf = o.conf ?? DEFAULT_ALLOC_CONF;
    this.limit = Math.min(o.capacityBytes ?? Number.POSITIVE_INFINITY, o.fractionBytes ?? Number.POSITIVE_INFINITY);
    this.gcBytes =
      o.fractionBytes !== undefined && this.conf.garbageCollectionThreshold > 0 ? this.conf.garbageCollectionThreshold * o.fractionBytes : undefined;
  }

  private readonly gcBytes: number | undefined;

  private pool(small: boolean, stream: number): FreeBlocks {
    const key = `${stream}:${small ? 's' : 'l'}`;
    let p = this.pools.get(key);
    if (!p) this.pools.set(key, (p = new FreeBlocks()));
    return p;
  }

  /** Allocates `bytes` (a tensor's storage) on `stream`; answers the handle to free it by. */
  alloc(bytes: number, stream = 0): number {
    const size = roundRequest(bytes, this.conf);
    const small = size <= SMALL_SIZE;
    const pool = this.pool(small, stream);
    let block = this.freeBlock(pool, size);
    if (block) {
      pool.remove(block);
      if (block.segment.grow) this.mapRange(block.segment, block.address, block.address + size);
    } else block = this.newBlock(size, small, stream);
    const rest = block.size - size;
    if (this.shouldSplit(small, size, rest)) {
      const r: Block = { ...block, address: block.address + size, size: rest, free: true, prev: block, next: block.next };
      if (block.next) block.next.prev = r;
      block.next = r;
      block.size = size;
      pool.insert(r);
    }
    block.free = false;
    this.touch(block, 1);
    this.allocated += block.size;
    this.peakAllocated = Math.max(this.peakAllocated, this.allocated);
    const h = this.nextHandle++;
    this.live.set(h, block);
    return h;
  }

  /** get_free_block: best fit, within what max_split_size_mb allows. */
  private freeBlock(pool: FreeBlocks, size: number): Block | undefined {
    pool.calls++;
    const b = pool.bestFit(size);
    if (!b) return undefined;
    const maxSplit = this.conf.maxSplitBytes;
    if (size < maxSplit && b.size >= maxSplit) return undefined;
    if (size >= maxSplit && b.size >= size + this.conf.maxNonSplitRoundingBytes) return undefined;
    return b;
  }

  private shouldSplit(small: boolean, size: number, rest: number): boolean {
    if (small || this.conf.expandableSegments) return rest >= MIN_BLOCK;
    return size < this.conf.maxSplitBytes && rest > SMALL_SIZE;
  }

  /** A block no cached one could give: a new segment, or the unused end of the stream's expandable segment. */
  private newBlock(size: number, small: boolean, stream: number): Block {
    if (this.conf.expandableSegments) return this.growBlock(size, small, stream);
    const bytes = segmentSize(size);
    this.makeRoom(bytes, stream, small);
    const segment: Segment = { id: this.nextSegment++, stream, small, reserved: bytes };
    // below every earlier segment, a gap apart: the model never treats two segments as one run
    this.nextAddress -= bytes + ROUND_LARGE;
    const head: Block = { address: this.nextAddress, size: bytes, segment, stream, small, free: true, prev: undefined, next: undefined, freedAt: 0 };
    this.segmentsHeld.add(segment);
    this.segmentAllocs++;
    this.reserve(bytes);
    return head;
  }

  /** cudaMalloc of `bytes` would fail: garbage collection, then the oversize cached blocks, then the whole cache. */
  private makeRoom(bytes: number, stream: number, small: boolean): void {
    if (this.gcBytes !== undefined) this.collectGarbage();
    if (this.reserved + bytes <= this.limit) return;
    if (!small && Number.isFinite(this.conf.maxSplitBytes)) this.releaseOversize(this.pool(false, stream), bytes);
    if (this.reserved + bytes <= this.limit) return;
    this.emptyCache();
    if (this.reserved + bytes > this.limit) this.outOfMemory = true;
  }

  private reserve(bytes: number): void {
    this.reserved += bytes;
    this.peakReserved = Math.max(this.peakReserved, this.reserved);
  }

  /** A whole free segment goes back to the driver. */
  private release(head: Block): void {
    this.pool(head.small, head.stream).remove(head);
    this.reserved -= head.segment.reserved;
    this.segmentsHeld.delete(head.segment);
  }

  /** release_available_cached_blocks: whole free blocks of at least max_split, largest first, until `bytes` fit. */
  private releaseOversize(pool: FreeBlocks, bytes: number): void {
    const oversize = pool.items.filter((b) => b.size >= this.conf.maxSplitBytes && !b.prev && !b.next && !b.segment.grow);
    for (const b of oversize.reverse()) {
      if (this.reserved + bytes <= this.limit) return;
      this.release(b);
    }
  }

  /** garbage_collect_cached_blocks: whole free large segments at least as old as the average, until under the threshold. */
  private collectGarbage(): void {
    const target = this.gcBytes as number;
    for (;;) {
      if (this.reserved <= target) return;
      const whole = [...this.pools.values()].flatMap((p) =>
        p.items.filter((b) => !b.small && !b.prev && !b.next && !b.segment.grow).map((b) => ({ b, age: p.calls - b.freedAt })),
      );
      if (whole.length === 0) return;
      const average = whole.reduce((s, x) => s + x.age, 0) / whole.length;
      for (const { b, age } of whole) if (age >= average && this.reserved > target) this.release(b);
    }
  }

  /**
   * Frees the block of handle `h`: it merges with free neighbours in its segment and is cached.
   * @throws Error for a handle that is not live (a mistake in the replay, never the user's input)
   */
  free(h: number): void {
    const b = this.live.get(h);
    if (!b) throw new Error(`torch-allocator: handle ${h} is not live`);
    this.live.delete(h);
    this.allocated -= b.size;
    this.touch(b, -1);
    const pool = this.pool(b.small, b.stream);
    let merged = b;
    const prev = b.prev;
    if (prev?.free) {
      pool.remove(prev);
      prev.size += b.size;
      prev.next = b.next;
      if (b.next) b.next.prev = prev;
      merged = prev;
    }
    const next = merged.next;
    if (next?.free) {
      pool.remove(next);
      merged.size += next.size;
      merged.next = next.next;
      if (next.next) next.next.prev = merged;
    }
    merged.free = true;
    const grow = merged.segment.grow;
    if (grow && !merged.next) {
      // the last block of an expandable segment joins its unused end
      grow.end = merged.address;
      grow.last = merged.prev;
      if (merged.prev) merged.prev.next = undefined;
      return;
    }
    pool.insert(merged);
  }

  /** torch.cuda.empty_cache(): segments with nothing allocated go back to the driver, expandable pages nothing lives on are unmapped. */
  emptyCache(): void {
    for (const p of this.pools.values()) for (const b of [...p.items]) if (!b.prev && !b.next && !b.segment.grow) this.release(b);
    for (const seg of this.expandable.values()) {
      const g = seg.grow!;
      for (let i = 0; i < g.mapped.length; i++)
        if (g.mapped[i] && g.live[i] === 0) {
          g.mapped[i] = 0;
          seg.reserved -= g.page;
          this.reserved -= g.page;
        }
    }
  }

  /** max_memory_reserved() so far. */
  get peakReservedBytes(): number {
    return this.peakReserved;
  }

  /** torch.cuda.reset_peak_memory_stats(): the peaks start again from the current figures. */
  resetPeaks(): void {
    this.peakAllocated = this.allocated;
    this.peakReserved = this.reserved;
  }

  stats(): AllocatorStats {
    let largest = 0;
    for (const p of this.pools.values()) largest = Math.max(largest, p.largest());
    for (const seg of this.expandable.values()) largest = Math.max(largest, mappedRun(seg.grow!));
    return {
      allocatedBytes: this.allocated,
      reservedBytes: this.reserved,
      peakAllocatedBytes: this.peakAllocated,
      peakReservedBytes: this.peakReserved,
      segments: this.segmentsHeld.size + this.expandable.size,
      segmentAllocs: this.segmentAllocs,
      largestFreeBytes: largest,
    };
  }

  /** The stream's expandable segment of the pool, created on first use. */
  private expandableOf(small: boolean, stream: number): Segment {
    const key = `${stream}:${small ? 's' : 'l'}`;
    let seg = this.expandable.get(key);
    if (!seg) {
      const page = small ? SMALL_BUFFER : LARGE_BUFFER;
      seg = {
        id: this.nextSegment++,
        stream,
        small,
        reserved: 0,
        grow: {
          base: this.nextAddress - EXPANDABLE_SPAN,
          end: this.nextAddress - EXPANDABLE_SPAN,
          last: undefined,
          page,
          mapped: new Uint8Array(64),
          live: new Int32Array(64),
        },
      };
      this.nextAddress -= EXPANDABLE_SPAN + ROUND_LARGE;
      this.expandable.set(key, seg);
    }
    return seg;
  }

  /** try_allocate_expandable_block: the block at the segment's unused end, its pages mapped. */
  private growBlock(size: number, small: boolean, stream: number): Block {
    const seg = this.expandableOf(small, stream);
    const g = seg.grow!;
    const address = g.end;
    this.mapRange(seg, address, address + size);
    const block: Block = { address, size, segment: seg, stream, small, free: true, prev: g.last, next: undefined, freedAt: 0 };
    if (g.last) g.last.next = block;
    g.last = block;
    g.end = address + size;
    return block;
  }

  /** Maps the pages of [from, to) of an expandable segment that are not mapped yet (making room first). */
  private mapRange(seg: Segment, from: number, to: number): void {
    const g = seg.grow!;
    const first = Math.floor((from - g.base) / g.page);
    const last = Math.ceil((to - g.base) / g.page);
    ensurePages(g, last);
    let missing = 0;
    for (let i = first; i < last; i++) if (!g.mapped[i]) missing++;
    if (missing === 0) return;
    if (this.reserved + missing * g.page > this.limit) {
      this.emptyCache();
      if (this.reserved + missing * g.page > this.limit) this.outOfMemory = true;
    }
    for (let i = first; i < last; i++) if (!g.mapped[i]) g.mapped[i] = 1;
    seg.reserved += missing * g.page;
    this.segmentAllocs++;
    this.reserve(missing * g.page);
  }

  /** Counts a live block on the pages it covers (expandable segments only). */
  private touch(b: Block, by: 1 | -1): void {
    const g = b.segment.grow;
    if (!g) return;
    const last = Math.ceil((b.address + b.size - g.base) / g.page);
    for (let i = Math.floor((b.address - g.base) / g.page); i < last; i++) g.live[i] = (g.live[i] ?? 0) + by;
  }
}

/** Grows an expandable segment's page tables to hold `pages` pages. */
function ensurePages(g: Growth, pages: number): void {
  if (pages <= g.mapped.length) return;
  let n = g.mapped.length;
  while (n < pages) n *= 2;
  const mapped = new Uint8Array(n);
  mapped.set(g.mapped);
  const live = new Int32Array(n);
  live.set(g.live);
  g.mapped = mapped;
  g.live = live;
}

/** The mapped bytes at an expandable segment's unused end: a free run one request can take without mapping. */
function mappedRun(g: Growth): number {
  let i = Math.floor((g.end - g.base) / g.page);
  const inPage = (g.end - g.base) % g.page;
  if (!g.mapped[i]) return 0;
  let bytes = g.page - inPage;
  while (g.mapped[++i]) bytes += g.page;
  return bytes;
}
