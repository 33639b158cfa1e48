/**
 * Free blocks, per stream and size class (small and large segments), each set ordered for best fit. A block sits in
 * the set of its own stream (`block.stream`) and of its segment's size class. Free blocks of split segments are
 * counted as inactive split memory, the figure fragmentation is read from.
 */
import { BlockTree } from './block-tree.js';
import type { Block } from './blocks.js';
import { Stat } from './stats.js';

export class FreeLists {
  /** Free bytes and blocks in segments that hold more than one block. */
  readonly inactiveSplit = new Stat();
  readonly inactiveSplitCount = new Stat();
  private readonly small = new Map<number, BlockTree<Block>>();
  private readonly large = new Map<number, BlockTree<Block>>();

  /** @param maxSplitBytes blocks larger than this serve only requests that are themselves that large. */
  constructor(private readonly maxSplitBytes: number) {}

  private lists(small: boolean): Map<number, BlockTree<Block>> {
    return small ? this.small : this.large;
  }

  private tree(small: boolean, stream: number): BlockTree<Block> {
    const lists = this.lists(small);
    let t = lists.get(stream);
    if (!t) {
      t = new BlockTree<Block>();
      lists.set(stream, t);
    }
    return t;
  }

  /** True when free block `b` may serve a request of `size` (an oversize block serves only oversize requests, as in PyTorch). */
  private fits(b: Block, size: number): boolean {
    return !(b.size > this.maxSplitBytes && size < this.maxSplitBytes);
  }

  /** Takes the best-fitting free block of `stream`, or null. */
  take(small: boolean, stream: number, size: number): Block | null {
    const t = this.lists(small).get(stream);
    if (!t || t.size === 0) return null;
    const b = t.lowerBound(size);
    if (!b || !this.fits(b, size)) return null;
    this.remove(b);
    return b;
  }

  /**
   * Takes a fitting free block of another stream than `stream`, the first that `canOrder` accepts (it orders
   * `stream` after the block's stream, so that the block's memory may be used), or null.
   */
  takeFromOther(small: boolean, stream: number, size: number, canOrder: (b: Block) => boolean): Block | null {
    for (const [other, t] of this.lists(small)) {
      if (other === stream || t.size === 0) continue;
      const b = t.lowerBound(size);
      if (!b || !this.fits(b, size) || !canOrder(b)) continue;
      this.remove(b);
      return b;
    }
    return null;
  }

  /** Takes `b` out of its set. */
  remove(b: Block): void {
    this.tree(b.segment.small, b.stream).remove(b);
    b.inTree = false;
    if (b.segment.blocks > 1) {
      this.inactiveSplit.sub(b.size);
      this.inactiveSplitCount.sub(1);
    }
  }

  /** Puts `b` in the set of its stream. */
  insert(b: Block): void {
    this.tree(b.segment.small, b.stream).insert(b);
    b.inTree = true;
    if (b.segment.blocks > 1) {
      this.inactiveSplit.add(b.size);
      this.inactiveSplitCount.add(1);
    }
  }

  /** The largest free block, measured by `bytesOf` (default: its size). */
  largest(bytesOf?: (b: Block) => number): number {
    let largest = 0;
    for (const lists of [this.small, this.large]) {
      for (const t of lists.values()) {
        if (!bytesOf) largest = Math.max(largest, t.max()?.size ?? 0);
        else for (const b of t.values()) largest = Math.max(largest, bytesOf(b));
      }
    }
    return largest;
  }
}
