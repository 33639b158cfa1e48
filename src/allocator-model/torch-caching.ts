/**
 * PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the native backend with its defaults) as a
 * model the planner replays a training step through, to know what max_memory_reserved() reports rather than add a
 * flat allowance. The rules it follows, each as the allocator has them by default:
 *
 * - every request is rounded up to 512 bytes; requests of at most 1 MiB come from the small pool, whose segments are
 *   2 MiB; larger ones from the large pool, whose segments are 20 MiB for requests under 10 MiB and the request
 *   rounded up to 2 MiB otherwise (kSmallSize, kSmallBuffer, kMinLargeAlloc, kLargeBuffer, kRoundLarge);
 * - a request takes the smallest cached free block of its pool that holds it (best fit, then the lowest address);
 *   the rest of the block is split off when it is at least 512 bytes (small pool) or more than 1 MiB (large pool),
 *   else the whole block is handed out and counted as allocated;
 * - a freed block merges with its free neighbours in the same segment only: blocks never merge across segments, so
 *   memory freed in one segment cannot serve a request larger than that segment's free run;
 * - a block belongs to the stream it was allocated on and is reused only by that stream (FSDP's all-gather and
 *   reduce-scatter streams keep pools of their own);
 * - max_split_size_mb unset (every block may be split), expandable_segments off, no garbage-collection threshold:
 *   segments are only returned by empty_cache(), so reserved memory only grows within a run.
 *
 * gpumem's own CachingPool (pool/caching-pool.ts) is a real allocator with its own choices (256-byte rounding, a
 * block split whenever the rest is worth one alignment, streams and events); this model keeps PyTorch's figures.
 */

const MiB = 1024 * 1024;
const MIN_BLOCK = 512;
const SMALL_SIZE = MiB;
const SMALL_BUFFER = 2 * MiB;
const MIN_LARGE_ALLOC = 10 * MiB;
const LARGE_BUFFER = 20 * MiB;
const ROUND_LARGE = 2 * MiB;

interface Block {
  address: number;
  size: number;
  segment: number;
  stream: number;
  small: boolean;
  free: boolean;
  prev: Block | undefined;
  next: Block | undefined;
}

/** The request size PyTorch's allocator rounds to. */
export const roundSize = (bytes: number): number => (bytes < MIN_BLOCK ? MIN_BLOCK : Math.ceil(bytes / MIN_BLOCK) * MIN_BLOCK);

/** The segment cudaMalloc is asked for when no cached block holds a request of `size` (rounded) bytes. */
export function segmentSize(size: number): number {
  if (size <= SMALL_SIZE) return SMALL_BUFFER;
  if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return Math.ceil(size / ROUND_LARGE) * ROUND_LARGE;
}

/** Free blocks of one pool, ordered by size then address, as the allocator's std::set is. */
class FreeBlocks {
  private readonly items: Block[] = [];

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
}

/** Peaks as torch.cuda.max_memory_allocated() and max_memory_reserved() report them, and the current figures. */
export interface AllocatorStats {
  allocatedBytes: number;
  reservedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  segments: number;
}

/** The caching allocator of one device, replaying allocations and frees by handle (on stream 0 unless told). */
export class TorchAllocatorModel {
  private readonly pools = new Map<string, FreeBlocks>();
  private readonly live = new Map<number, Block>();
  private readonly segmentBlocks = new Map<number, { head: Block; size: number }>();
  private nextHandle = 1;
  private nextAddress = 0;
  private nextSegment = 0;
  private allocated = 0;
  private reserved = 0;
  private peakAllocated = 0;
  private peakReserved = 0;
  /** A request found no room even after the cache was released (PyTorch would raise OutOfMemoryError). */
  outOfMemory = false;

  /**
   * `capacityBytes`: what cudaMalloc can hand out (the device less what lies outside the allocator); undefined: no
   * limit, so the cache is never released.
   */
  constructor(private readonly capacityBytes?: number) {}

  private pool(small: boolean, stream: number): FreeBlocks {
    const key = `${stream}:${small ? 's' : 'l'}`;
    let p = this.pools.get(key);
    if (!p) this.pools.set(key, (p = new FreeBlocks()));
    return p;
  }

  /** Allocates `bytes` (a tensor's storage) on `stream`; answers the handle to free it by. */
  alloc(bytes: number, stream = 0): number {
    const size = roundSize(bytes);
    const small = size <= SMALL_SIZE;
    const pool = this.pool(small, stream);
    let block = pool.bestFit(size);
    if (block) pool.remove(block);
    else block = this.newSegment(size, small, stream);
    const rest = block.size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {
      const r: Block = { address: block.address + size, size: rest, segment: block.segment, stream, small, free: true, prev: block, next: block.next };
      if (block.next) block.next.prev = r;
      block.next = r;
      block.size = size;
      pool.insert(r);
    }
    block.free = false;
    this.allocated += block.size;
    this.peakAllocated = Math.max(this.peakAllocated, this.allocated);
    const h = this.nextHandle++;
    this.live.set(h, block);
    return h;
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
    pool.insert(merged);
  }

  /** torch.cuda.empty_cache(): segments with nothing allocated go back to the driver. */
  emptyCache(): void {
    for (const [id, s] of this.segmentBlocks) {
      if (!s.head.free || s.head.next) continue;
      this.pool(s.head.small, s.head.stream).remove(s.head);
      this.reserved -= s.size;
      this.segmentBlocks.delete(id);
    }
  }

  /** torch.cuda.reset_peak_memory_stats(): the peaks start again from the current figures. */
  resetPeaks(): void {
    this.peakAllocated = this.allocated;
    this.peakReserved = this.reserved;
  }

  stats(): AllocatorStats {
    return {
      allocatedBytes: this.allocated,
      reservedBytes: this.reserved,
      peakAllocatedBytes: this.peakAllocated,
      peakReservedBytes: this.peakReserved,
      segments: this.segmentBlocks.size,
    };
  }

  private newSegment(size: number, small: boolean, stream: number): Block {
    const bytes = segmentSize(size);
    // cudaMalloc failing: the allocator frees its cached segments and tries again (release_cached_blocks)
    if (this.capacityBytes !== undefined && this.reserved + bytes > this.capacityBytes) {
      this.emptyCache();
      if (this.reserved + bytes > this.capacityBytes) this.outOfMemory = true;
    }
    const segment = this.nextSegment++;
    const head: Block = { address: this.nextAddress, size: bytes, segment, stream, small, free: true, prev: undefined, next: undefined };
    // segments lie apart: a gap keeps the model from ever treating two of them as one run
    this.nextAddress += bytes + ROUND_LARGE;
    this.segmentBlocks.set(segment, { head, size: bytes });
    this.reserved += bytes;
    this.peakReserved = Math.max(this.peakReserved, this.reserved);
    return head;
  }
}
