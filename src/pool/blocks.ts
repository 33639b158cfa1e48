/** The pool's bookkeeping objects: segments (memory from upstream) cut into blocks, and the recycling of blocks. */
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import type { TreeNode } from './block-tree.js';

/** Memory taken from upstream in one piece (or a growable range of reserved address space), cut into blocks. */
export class Segment {
  head!: Block;
  blocks = 0;
  /** Growable segments: bytes of physical memory mapped, and which granules are mapped. */
  mapped = 0;
  pages: Uint8Array | null = null;
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

export class Block implements TreeNode {
  size = 0;
  address = 0;
  heapIndex = -1;
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

/** Keeps freed Block objects for reuse, so that a cache hit allocates no object. */
export class BlockRecycler {
  private readonly spare: Block[] = [];

  /** A block in its initial state. */
  take(): Block {
    const b = this.spare.pop() ?? new Block();
    b.heapIndex = -1;
    b.prev = b.next = null;
    b.allocated = false;
    b.inTree = false;
    b.requested = 0;
    b.usedOn = null;
    b.events = null;
    b.streamRef = undefined;
    return b;
  }

  give(b: Block): void {
    this.spare.push(b);
  }
}

/** The first block of a segment, or null when it has none. */
export function firstBlock(seg: Segment): Block | null {
  return seg.blocks > 0 ? seg.head : null;
}
