/**
 * An ordered set of free blocks keyed by (size, address): a treap whose links live in the blocks themselves, so
 * inserting and removing allocate nothing. `lowerBound(n)` is best fit: the smallest block of at least n bytes,
 * the lowest address among equals. Every operation is O(log n) expected.
 */

/** The fields a block needs to live in a tree. */
export interface TreeNode {
  size: number;
  address: number;
  left: TreeNode | null;
  right: TreeNode | null;
  priority: number;
}

function less(a: TreeNode, b: TreeNode): boolean {
  return a.size < b.size || (a.size === b.size && a.address < b.address);
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
  private root: TreeNode | null = null;
  private count = 0;
  private total = 0;

  get size(): number {
    return this.count;
  }

  /** Sum of the sizes of the blocks in the tree. */
  get bytes(): number {
    return this.total;
  }

  insert(node: T): void {
    node.left = null;
    node.right = null;
    node.priority = nextPriority();
    this.root = this.insertAt(this.root, node);
    this.count++;
    this.total += node.size;
  }

  private insertAt(at: TreeNode | null, node: TreeNode): TreeNode {
    if (at === null) return node;
    if (less(node, at)) {
      at.left = this.insertAt(at.left, node);
      if (at.left.priority > at.priority) return this.rotateRight(at);
    } else {
      at.right = this.insertAt(at.right, node);
      if (at.right.priority > at.priority) return this.rotateLeft(at);
    }
    return at;
  }

  /** Removes `node`, which must be in the tree. Answers false when it was not found. */
  remove(node: T): boolean {
    const before = this.count;
    this.root = this.removeAt(this.root, node);
    if (this.count < before) {
      this.total -= node.size;
      node.left = node.right = null;
      return true;
    }
    return false;
  }

  private removeAt(at: TreeNode | null, node: TreeNode): TreeNode | null {
    if (at === null) return null;
    if (at === node) {
      this.count--;
      return this.merge(at.left, at.right);
    }
    if (less(node, at)) at.left = this.removeAt(at.left, node);
    else at.right = this.removeAt(at.right, node);
    return at;
  }

  private merge(a: TreeNode | null, b: TreeNode | null): TreeNode | null {
    if (a === null) return b;
    if (b === null) return a;
    if (a.priority > b.priority) {
      a.right = this.merge(a.right, b);
      return a;
    }
    b.left = this.merge(a, b.left);
    return b;
  }

  private rotateRight(n: TreeNode): TreeNode {
    const l = n.left!;
    n.left = l.right;
    l.right = n;
    return l;
  }

  private rotateLeft(n: TreeNode): TreeNode {
    const r = n.right!;
    n.right = r.left;
    r.left = n;
    return r;
  }

  /** The smallest block with size >= `size` (lowest address among equal sizes), or null. */
  lowerBound(size: number): T | null {
    let at = this.root;
    let best: TreeNode | null = null;
    while (at !== null) {
      if (at.size >= size) {
        best = at;
        at = at.left;
      } else at = at.right;
    }
    return best as T | null;
  }

  /** The largest block, or null. */
  max(): T | null {
    let at = this.root;
    if (at === null) return null;
    while (at.right !== null) at = at.right;
    return at as T;
  }

  /** Every block in (size, address) order. */
  *values(): IterableIterator<T> {
    const stack: TreeNode[] = [];
    let at = this.root;
    while (at !== null || stack.length > 0) {
      while (at !== null) {
        stack.push(at);
        at = at.left;
      }
      const n = stack.pop()!;
      yield n as T;
      at = n.right;
    }
  }
}
