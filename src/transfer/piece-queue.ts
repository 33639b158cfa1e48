/**
 * The engine's queue of pieces (flow.ts), kept as columns of numbers: a list of 16384 arrays is 16384 rows of typed
 * arrays, not 16384 objects that live until the list has landed (which the garbage collector would have to promote
 * and trace). A piece is `bytes` between host memory at `host` (a file offset for a file transfer) and device memory
 * at `dev`, for one transfer; `key` names its host buffer (or file) for the hazard check and `keyBase` is the address
 * of that buffer's first byte (0 for a file).
 */
import type { Transfer } from './flow-types.js';

/** A piece's flags. */
export const PIECE = {
  /** The device side is managed memory (copied with the runtime's default kind, never batched). */
  MANAGED: 1,
  /** The host side is memory the runtime pinned or registered (a direct piece may go into a batched copy). */
  PINNED: 2,
  /**
   * The host side is a JS buffer: `host` is the offset in the ArrayBuffer `key`, whose address the engine asks the
   * backend for when the piece enters a chunk (not in the call that queued it), and gives back when the chunk settles.
   */
  BUFFER: 4,
} as const;

/** Rows of pieces as columns: what the queue and a chunk's segment list both hold. */
export class PieceColumns {
  host: Float64Array<ArrayBuffer>;
  dev: Float64Array<ArrayBuffer>;
  bytes: Float64Array<ArrayBuffer>;
  keyBase: Float64Array<ArrayBuffer>;
  flags: Uint8Array<ArrayBuffer>;
  key: Array<object | string> = [];
  transfer: Transfer[] = [];

  constructor(rows: number) {
    this.host = new Float64Array(rows);
    this.dev = new Float64Array(rows);
    this.bytes = new Float64Array(rows);
    this.keyBase = new Float64Array(rows);
    this.flags = new Uint8Array(rows);
  }

  /** Writes row `i`. */
  protected write(i: number, t: Transfer, host: number, dev: number, bytes: number, flags: number, key: object | string, keyBase: number): void {
    this.host[i] = host;
    this.dev[i] = dev;
    this.bytes[i] = bytes;
    this.keyBase[i] = keyBase;
    this.flags[i] = flags;
    this.key[i] = key;
    this.transfer[i] = t;
  }

  /** Drops row `i`'s references (a buffer that landed is not kept alive by the row). */
  protected forget(i: number): void {
    this.key[i] = '';
    this.transfer[i] = undefined as unknown as Transfer;
  }
}

export class PieceQueue extends PieceColumns {
  /** The first piece not yet taken, and one past the last. */
  head = 0;
  tail = 0;

  constructor() {
    super(64);
  }

  get empty(): boolean {
    return this.head >= this.tail;
  }

  /** Makes room for `rows` more pieces after the tail (the columns do not move until more than that are pushed). */
  reserve(rows: number): void {
    if (this.tail + rows > this.host.length) this.grow(rows);
  }

  /** Appends a piece. */
  push(t: Transfer, host: number, dev: number, bytes: number, flags: number, key: object | string, keyBase: number): void {
    if (this.tail === this.host.length) this.grow();
    this.write(this.tail++, t, host, dev, bytes, flags, key, keyBase);
  }

  /** Drops the last `count` pieces (a list refused after some of its items were pushed); answers their bytes. */
  dropLast(count: number): number {
    let n = 0;
    const from = this.tail - count;
    for (let i = from; i < this.tail; i++) {
      n += this.bytes[i]!;
      this.forget(i);
    }
    this.tail = from;
    if (this.head >= this.tail) this.head = this.tail = 0;
    return n;
  }

  /** Takes `take` bytes off the front of the head piece; the whole piece leaves the queue. */
  consume(take: number): void {
    const i = this.head;
    if (take === this.bytes[i]) {
      this.leave();
      return;
    }
    this.host[i] = this.host[i]! + take;
    this.dev[i] = this.dev[i]! + take;
    this.bytes[i] = this.bytes[i]! - take;
  }

  /** The head piece leaves the queue (taken whole, or dropped). */
  leave(): void {
    // The references go at once: a landed list's buffers are not kept alive by the queue.
    this.forget(this.head++);
    if (this.head === this.tail) this.head = this.tail = 0;
  }

  /** True when a piece of `t` is still queued. */
  holds(t: Transfer): boolean {
    for (let i = this.head; i < this.tail; i++) if (this.transfer[i] === t) return true;
    return false;
  }

  /** Doubles the columns (or more, for room for `extra` pieces), moving the queued pieces to the front. */
  private grow(extra = 1): void {
    const n = this.tail - this.head;
    const cap = Math.max(64, 2 * n, n + extra);
    const move = (a: Float64Array): Float64Array<ArrayBuffer> => {
      const b = new Float64Array(cap);
      b.set(a.subarray(this.head, this.tail));
      return b;
    };
    this.host = move(this.host);
    this.dev = move(this.dev);
    this.bytes = move(this.bytes);
    this.keyBase = move(this.keyBase);
    const f = new Uint8Array(cap);
    f.set(this.flags.subarray(this.head, this.tail));
    this.flags = f;
    this.key = this.key.slice(this.head, this.tail);
    this.transfer = this.transfer.slice(this.head, this.tail);
    this.head = 0;
    this.tail = n;
  }
}
