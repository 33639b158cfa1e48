/**
 * A set of disjoint address ranges, each with the stream it belongs to: the memory an allocator has reserved. An
 * expandable segment maps and unmaps pieces of one address range, so reserved memory is a set of ranges, not a list
 * of segments keyed by their first address: unmapping the middle of a range leaves two.
 */
import type { Extent } from '../formats/trace-events.js';

interface Piece {
  lo: number;
  hi: number;
  stream: number;
}

export class RangeSet {
  /** Disjoint pieces sorted by address. */
  private pieces: Piece[] = [];

  /** Index of the first piece that ends after `addr`. */
  private firstEndingAfter(addr: number): number {
    let lo = 0;
    let hi = this.pieces.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.pieces[mid]!.hi <= addr) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Removes [lo, hi) wherever it is held; returns the bytes that were held there. */
  remove(lo: number, hi: number): number {
    if (hi <= lo) return 0;
    const i = this.firstEndingAfter(lo);
    let removed = 0;
    const keep: Piece[] = [];
    let j = i;
    for (; j < this.pieces.length && this.pieces[j]!.lo < hi; j++) {
      const p = this.pieces[j]!;
      removed += Math.min(p.hi, hi) - Math.max(p.lo, lo);
      if (p.lo < lo) keep.push({ lo: p.lo, hi: lo, stream: p.stream });
      if (p.hi > hi) keep.push({ lo: hi, hi: p.hi, stream: p.stream });
    }
    this.pieces.splice(i, j - i, ...keep);
    return removed;
  }

  /** Adds [lo, hi) for `stream`; returns the bytes of it that were already held. */
  add(lo: number, hi: number, stream: number): number {
    if (hi <= lo) return 0;
    const already = this.remove(lo, hi);
    this.pieces.splice(this.firstEndingAfter(lo), 0, { lo, hi, stream });
    return already;
  }

  /** Bytes held. */
  total(): number {
    let s = 0;
    for (const p of this.pieces) s += p.hi - p.lo;
    return s;
  }

  /** The held ranges, adjacent pieces of one stream joined. */
  extents(): Extent[] {
    const out: Extent[] = [];
    for (const p of this.pieces) {
      const last = out[out.length - 1];
      if (last && last.address + last.size === p.lo && last.stream === p.stream) last.size += p.hi - p.lo;
      else out.push({ address: p.lo, size: p.hi - p.lo, stream: p.stream });
    }
    return out;
  }
}
