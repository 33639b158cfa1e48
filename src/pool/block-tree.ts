/**
 * An ordered set of free blocks for best fit: `lowerBound(n)` answers the smallest block of at least n bytes, the
 * lowest address among blocks of that size. Blocks of one size sit in a bucket, a binary min-heap by address; the
 * buckets are found by size through a hash map (an exact fit, the common case once sizes are rounded, costs one
 * lookup) and ordered by size in a treap (the next larger size). A bucket that empties stays in place for a while
 * (at most EMPTY_KEPT of them), so that a block split and merged again, and sizes that come and go, cost no map or
 * treap change. Inserting and removing allocate nothing in steady state; every operation is O(log n) (a heap step
 * within one size, a treap step over the distinct sizes).
 */

/** Empty buckets kept before they are taken out of the map and the treap. */
const EMPTY_KEPT = 8;

/** The fields a block needs to live in the set. */
export interface TreeNode {
  size: number;
  address: number;
  /** Position in its size bucket's heap; -1 when not in a set. */
  heapIndex: number;
}

interface Bucket<T extends TreeNode> {
  size: number;
  heap: T[];
  left: Bucket<T> | null;
  right: Bucket<T> | null;
  priority: number;
  /** On the list of emptied buckets. */
  queued: boolean;
}

/** xorshift32: cheap, allocation-free priorities. */
let seed = 0x9e3779b9;
function nextPriority(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return seed >>> 0;
}

export class BlockTree<T extends TreeNode> {
  private root: Bucket<T> | null = null;
  private readonly bySize = new Map<number, Bucket<T>>();
  private readonly spare: Bucket<T>[] = [];
  /** Buckets that emptied since the last purge (some may have filled again). */
  private readonly emptied: Bucket<T>[] = [];
  private count = 0;
  private total = 0;

  get size(): number {
    return this.count;
  }

  /** Sum of the sizes of the blocks in the set. */
  get bytes(): number {
    return this.total;
  }

  insert(node: T): void {
    let b = this.bySize.get(node.size);
    if (b === undefined) {
      b = this.spare.pop() ?? { size: 0, heap: [], left: null, right: null, priority: 0, queued: false };
      b.size = node.size;
      b.left = b.right = null;
      b.priority = nextPriority();
      this.bySize.set(node.size, b);
      this.root = this.insertAt(this.root, b);
    }
    const h = b.heap;
    h.push(node);
    siftUp(h, h.length - 1);
    this.count++;
    this.total += node.size;
  }

  /** Removes `node`. Answers false when it was not in this set. */
  remove(node: T): boolean {
    const b = this.bySize.get(node.size);
    const i = node.heapIndex;
    if (b === undefined || i < 0 || b.heap[i] !== node) return false;
    const h = b.heap;
    const last = h.pop()!;
    if (i < h.length) {
      h[i] = last;
      last.heapIndex = i;
      if (i > 0 && last.address < h[(i - 1) >> 1]!.address) siftUp(h, i);
      else siftDown(h, i);
    }
    node.heapIndex = -1;
    this.count--;
    this.total -= node.size;
    if (h.length === 0 && !b.queued) {
      b.queued = true;
      this.emptied.push(b);
      if (this.emptied.length > EMPTY_KEPT) this.purge();
    }
    return true;
  }

  /** Takes the buckets that are still empty out of the map and the treap. */
  private purge(): void {
    for (const b of this.emptied) {
      b.queued = false;
      if (b.heap.length > 0) continue;
      this.bySize.delete(b.size);
      this.root = this.removeAt(this.root, b);
      b.left = b.right = null;
      this.spare.push(b);
    }
    this.emptied.length = 0;
  }

  private insertAt(at: Bucket<T> | null, b: Bucket<T>): Bucket<T> {
    if (at === null) return b;
    if (b.size < at.size) {
      at.left = this.insertAt(at.left, b);
      if (at.left.priority > at.priority) return rotateRight(at);
    } else {
      at.right = this.insertAt(at.right, b);
      if (at.right.priority > at.priority) return rotateLeft(at);
    }
    return at;
  }

  private removeAt(at: Bucket<T> | null, b: Bucket<T>): Bucket<T> | null {
    if (at === null) return null;
    if (at === b) return merge(at.left, at.right);
    if (b.size < at.size) at.left = this.removeAt(at.left, b);
    else at.right = this.removeAt(at.right, b);
    return at;
  }

  /** The smallest block with size >= `size` (lowest address among equal sizes), or null. */
  lowerBound(size: number): T | null {
    const exact = this.bySize.get(size);
    if (exact !== undefined && exact.heap.length > 0) return exact.heap[0]!;
    // The smallest bucket of at least `size`; past empty ones (at most EMPTY_KEPT) to the next size up.
    for (let want = exact === undefined ? size : size + 1; ; ) {
      let at = this.root;
      let best: Bucket<T> | null = null;
      while (at !== null) {
        if (at.size >= want) {
          best = at;
          at = at.left;
        } else at = at.right;
      }
      if (best === null) return null;
      if (best.heap.length > 0) return best.heap[0]!;
      want = best.size + 1;
    }
  }

  /** A largest block, or null. */
  max(): T | null {
    const stack: Bucket<T>[] = [];
    let at = this.root;
    while (at !== null || stack.length > 0) {
      while (at !== null) {
        stack.push(at);
        at = at.right;
      }
      const b = stack.pop()!;
      if (b.heap.length > 0) return b.heap[0]!;
      at = b.left;
    }
    return null;
  }

  /** Every block, in increasing size (within one size, in heap order). */
  *values(): IterableIterator<T> {
    const stack: Bucket<T>[] = [];
    let at = this.root;
    while (at !== null || stack.length > 0) {
      while (at !== null) {
        stack.push(at);
        at = at.left;
      }
      const b = stack.pop()!;
      yield* b.heap;
      at = b.right;
    }
  }
}

function siftUp<T extends TreeNode>(h: T[], i: number): void {
  const node = h[i]!;
  while (i > 0) {
    const p = (i - 1) >> 1;
    const parent = h[p]!;
    if (parent.address <= node.address) break;
    h[i] = parent;
    parent.heapIndex = i;
    i = p;
  }
  h[i] = node;
  node.heapIndex = i;
}

function siftDown<T extends TreeNode>(h: T[], i: number): void {
  const node = h[i]!;
  const n = h.length;
  for (;;) {
    let c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && h[c + 1]!.address < h[c]!.address) c++;
    const child = h[c]!;
    if (child.address >= node.address) break;
    h[i] = child;
    child.heapIndex = i;
    i = c;
  }
  h[i] = node;
  node.heapIndex = i;
}

function merge<T extends TreeNode>(a: Bucket<T> | null, b: Bucket<T> | null): Bucket<T> | null {
  if (a === null) return b;
  if (b === null) return a;
  if (a.priority > b.priority) {
    a.right = merge(a.right, b);
    return a;
  }
  b.left = merge(a, b.left);
  return b;
}

function rotateRight<T extends TreeNode>(n: Bucket<T>): Bucket<T> {
  const l = n.left!;
  n.left = l.right;
  l.right = n;
  return l;
}

function rotateLeft<T extends TreeNode>(n: Bucket<T>): Bucket<T> {
  const r = n.right!;
  n.right = r.left;
  r.left = n;
  return r;
}
