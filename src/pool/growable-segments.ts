/**
 * Growable segments: one per stream and size class, in address space reserved up front, extended at its end as
 * requests need, with physical memory mapped in granules only under allocated blocks (the virtual memory API on a
 * GPU, or a simulated device). The pool decides when to map and unmap; this class does the granule bookkeeping.
 */
import { OutOfMemoryError } from '../errors.js';
import { firstBlock, Segment, type Block, type BlockRecycler } from './blocks.js';
import type { FreeLists } from './free-lists.js';
import type { GrowableSource } from './growable.js';

export class GrowableSegments {
  private readonly growing = new Map<string, Segment>();
  readonly granularity: number;

  constructor(
    readonly source: GrowableSource,
    private readonly step: { small: number; large: number },
    private readonly device: number | undefined,
  ) {
    this.granularity = source.granularity;
  }

  /** The growable segment of `stream` and size class, reserved (and passed to `created`) on first use. */
  segment(small: boolean, stream: number, created: (seg: Segment) => void): Segment {
    const id = `${stream}:${small ? 's' : 'l'}`;
    let seg = this.growing.get(id);
    if (!seg) {
      const bytes = this.source.reserveBytes;
      const address = this.source.reserve(bytes);
      seg = new Segment(address, 0, stream, small, true, bytes);
      seg.pages = new Uint8Array(Math.ceil(bytes / this.granularity));
      this.growing.set(id, seg);
      created(seg);
    }
    return seg;
  }

  /**
   * Extends `seg` at its end until a free block of `size` bytes fits there (the free tail of the same stream grows,
   * or a new block is appended) and answers that block, taken out of the free lists. Nothing is mapped yet.
   * @throws OutOfMemoryError when the reserved address space is exhausted.
   */
  extend(seg: Segment, stream: number, size: number, free: FreeLists, blocks: BlockRecycler): Block {
    let last = firstBlock(seg);
    while (last?.next) last = last.next;
    const tailFree = last && !last.allocated && last.inTree && last.stream === stream ? last.size : 0;
    const step = seg.small ? this.step.small : this.step.large;
    const bytes = Math.max(step, Math.ceil((size - tailFree) / this.granularity) * this.granularity);
    if (seg.size + bytes > seg.reserved) {
      throw new OutOfMemoryError(`the growable segment's reserved address space (${seg.reserved} bytes) is exhausted`, {
        requestedBytes: size,
        device: this.device,
      });
    }
    const at = seg.address + seg.size;
    seg.size += bytes;
    if (last && tailFree > 0) {
      free.remove(last);
      last.size += bytes;
      return last;
    }
    const b = blocks.take();
    b.segment = seg;
    b.stream = stream;
    b.address = at;
    b.size = bytes;
    if (last) {
      last.next = b;
      b.prev = last;
    } else seg.head = b;
    seg.blocks++;
    return b;
  }

  /** Granules of [lo, hi) not mapped yet. */
  missing(seg: Segment, lo: number, hi: number): number {
    const { first, end } = this.span(seg, lo, hi);
    let n = 0;
    for (let p = first; p < end; p++) if (seg.pages![p] === 0) n++;
    return n;
  }

  /** Maps the granules of [lo, hi) not mapped yet; `mapped` hears of each. */
  map(seg: Segment, lo: number, hi: number, mapped: (at: number, bytes: number) => void): void {
    const gran = this.granularity;
    const { first, end } = this.span(seg, lo, hi);
    for (let p = first; p < end; p++) {
      if (seg.pages![p] === 1) continue;
      const at = seg.address + p * gran;
      this.source.map(at, gran);
      seg.pages![p] = 1;
      seg.mapped += gran;
      mapped(at, gran);
    }
  }

  /**
   * Unmaps the granules that lie wholly in free blocks of `seg` (none waiting on another stream's events), except
   * those under [keepLo, keepHi). Answers the bytes given back; `unmapped` hears of each granule.
   */
  unmapFree(seg: Segment, keepLo: number, keepHi: number, unmapped: (at: number, bytes: number) => void): number {
    const gran = this.granularity;
    const pages = seg.pages!;
    let released = 0;
    for (let b = firstBlock(seg); b; b = b.next) {
      if (b.allocated || !b.inTree || b.events !== null) continue;
      const first = Math.ceil((b.address - seg.address) / gran);
      const end = Math.floor((b.address + b.size - seg.address) / gran);
      for (let p = first; p < end; p++) {
        if (pages[p] !== 1) continue;
        const at = seg.address + p * gran;
        if (at < keepHi && at + gran > keepLo) continue;
        released += this.source.unmap(at, gran);
        pages[p] = 0;
        seg.mapped -= gran;
        unmapped(at, gran);
      }
    }
    return released;
  }

  /** Bytes of free block `b` that physical memory backs. */
  backedBytes(b: Block): number {
    const seg = b.segment;
    const gran = this.granularity;
    let n = 0;
    const end = b.address + b.size;
    for (let p = Math.floor((b.address - seg.address) / gran); seg.address + p * gran < end; p++) {
      if (seg.pages![p] !== 1) continue;
      const lo = Math.max(b.address, seg.address + p * gran);
      const hi = Math.min(end, seg.address + (p + 1) * gran);
      n += hi - lo;
    }
    return n;
  }

  private span(seg: Segment, lo: number, hi: number): { first: number; end: number } {
    return { first: Math.floor((lo - seg.address) / this.granularity), end: Math.ceil((hi - seg.address) / this.granularity) };
  }
}
