/** Counters with current, peak and total (cumulative increase), as PyTorch's and RMM's allocators report them. */

export class Stat {
  current = 0;
  peak = 0;
  /** Sum of every increase: for bytes, all bytes ever allocated; for counts, all allocations ever made. */
  total = 0;

  add(n: number): void {
    this.current += n;
    this.total += n;
    if (this.current > this.peak) this.peak = this.current;
  }

  sub(n: number): void {
    this.current -= n;
  }

  toJSON(): { current: number; peak: number; total: number } {
    return { current: this.current, peak: this.peak, total: this.total };
  }
}

/** A pool's statistics. Bytes are bytes; counts are counts. */
export interface PoolStats {
  /** Sizes the callers asked for, of live allocations. */
  requestedBytes: StatJSON;
  /** Rounded block sizes of live allocations. */
  allocatedBytes: StatJSON;
  /** Memory held from the upstream resource (segments; mapped bytes for growable segments). */
  reservedBytes: StatJSON;
  /** Allocated, plus blocks freed but waiting for other streams' events. */
  activeBytes: StatJSON;
  /** Free blocks inside segments that also hold other blocks: the fragmentation that can be reused. */
  inactiveSplitBytes: StatJSON;
  allocationCount: StatJSON;
  segmentCount: StatJSON;
  inactiveSplitCount: StatJSON;
  /** Allocations served from the cache, and those that needed the upstream resource. */
  cacheHits: number;
  cacheMisses: number;
  segmentAllocs: number;
  segmentFrees: number;
  /** Times a block freed on one stream was handed to another (made safe with an event). */
  crossStreamReuses: number;
  ooms: number;
  /** 1 − largest free block / free bytes (0 when nothing is free). */
  fragmentation: number;
  largestFreeBlockBytes: number;
  freeBytes: number;
}

export type StatJSON = { current: number; peak: number; total: number };

/** Fragmentation as 1 − largest free block / free bytes; 0 when no byte is free. */
export function fragmentation(largestFree: number, freeBytes: number): number {
  return freeBytes <= 0 ? 0 : 1 - largestFree / freeBytes;
}
