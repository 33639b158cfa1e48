/**
 * A chunk's segments (flow.ts): the pieces, or parts of pieces, one chunk carries, as columns of numbers with room
 * for the most a chunk may hold. The engine keeps a few of these and reuses them from chunk to chunk, with the
 * scratch columns a chunk's copies are written into (the host threads' list and the device's batch), so that a chunk
 * allocates the same few objects whether it carries one piece or 512.
 */
import type { Backend } from '../backend/backend.js';
import type { Transfer } from './flow-types.js';
import { PieceColumns } from './piece-queue.js';

/** Most segments in one chunk (one batched copy, one gather on the threads). */
export const MAX_SEGMENTS = 512;

export class SegmentList extends PieceColumns {
  /** Offset in the chunk's slot (staged and file chunks). */
  readonly at = new Float64Array(MAX_SEGMENTS);
  /** The transfers carried, each once, in the order of their first segment, and the bytes of each in the chunk. */
  readonly transfers: Transfer[] = [];
  readonly transferBytes: number[] = [];
  /** The addresses of the JS buffers the chunk had the backend place (given back when it settles). */
  private readonly adopted = new Float64Array(MAX_SEGMENTS);
  private adoptedCount = 0;
  private lastBuffer: ArrayBuffer | undefined;
  private lastBase = 0;
  count = 0;
  /** Bytes of every segment. */
  total = 0;
  /** Scratch for a chunk's copies after adjacent segments are merged: destinations, sources, sizes. */
  readonly copyDst = new Float64Array(MAX_SEGMENTS);
  readonly copySrc = new Float64Array(MAX_SEGMENTS);
  readonly copyBytes = new Float64Array(MAX_SEGMENTS);
  /** The flags (PIECE) of each merged copy's segments (only segments of equal flags are merged). */
  readonly copyFlags = new Uint8Array(MAX_SEGMENTS);
  /** The same as the batch call takes them: (low, high) 32-bit halves per copy. */
  readonly batchDst = new Uint32Array(2 * MAX_SEGMENTS);
  readonly batchSrc = new Uint32Array(2 * MAX_SEGMENTS);
  readonly batchBytes = new Uint32Array(2 * MAX_SEGMENTS);
  /** The segments in slot order when {@link placeByDevice} moved them (`placed`), else segment order is slot order. */
  readonly slotOrder = new Uint16Array(MAX_SEGMENTS);
  placed = false;

  constructor() {
    super(MAX_SEGMENTS);
  }

  get full(): boolean {
    return this.count >= MAX_SEGMENTS;
  }

  /**
   * Adds a segment. A transfer's segments in one chunk follow each other (a transfer's pieces are queued together,
   * and a chunk holds one mode), so a transfer differing from the last one added is new to the chunk.
   */
  add(t: Transfer, host: number, dev: number, bytes: number, flags: number, key: object | string, keyBase: number, at: number): void {
    this.put(this.count, t, host, dev, bytes, flags, key, keyBase, at);
    this.appended(t, 1, bytes);
  }

  /** Writes segment `i` (one of a run that {@link appended} then counts): a row and its slot offset. */
  put(i: number, t: Transfer, host: number, dev: number, bytes: number, flags: number, key: object | string, keyBase: number, at: number): void {
    this.write(i, t, host, dev, bytes, flags, key, keyBase);
    this.at[i] = at;
  }

  /** Counts `count` segments of `t`, of `bytes` in all, written after the last one with {@link put}. */
  appended(t: Transfer, count: number, bytes: number): void {
    this.count += count;
    this.total += bytes;
    const last = this.transfers.length - 1;
    if (this.transfers[last] !== t) {
      this.transfers.push(t);
      this.transferBytes.push(bytes);
    } else this.transferBytes[last] = this.transferBytes[last]! + bytes;
  }

  /**
   * Lays a staged chunk's segments out in its slot in the order of their device addresses, when they are not in that
   * order already and no two of their device ranges overlap: a list that lands in reverse (or any) order then sits in
   * the slot as it sits in device memory, and its pieces that continue each other there land with one device copy
   * instead of a batched copy of every piece (docs/performance.md, one H200: 16384 arrays of 16 KiB landing in reverse
   * order, each chunk one batch of 512 copies, 7.19 GB/s; the same list in order, one copy per chunk, 19.7). Sound
   * because only the slot offsets change: each piece still goes between its own host and device bytes, and with no
   * device range overlapping another the device copies' order changes nothing (with an overlap the segments keep the
   * order asked, as before). Call once, after the last add.
   */
  placeByDevice(): void {
    const n = this.count;
    if (n < 2) return;
    const dev = this.dev;
    const bytes = this.bytes;
    let up = true;
    let down = true;
    for (let i = 1; i < n && (up || down); i++) {
      if (dev[i]! < dev[i - 1]! + bytes[i - 1]!) up = false;
      if (dev[i]! + bytes[i]! > dev[i - 1]!) down = false;
    }
    if (up) return; // in device order already, no overlap: the slot order is the device order
    const order = this.slotOrder.subarray(0, n);
    if (down) for (let k = 0; k < n; k++) order[k] = n - 1 - k;
    else {
      for (let k = 0; k < n; k++) order[k] = k;
      order.sort((a, b) => dev[a]! - dev[b]! || a - b);
      for (let k = 1; k < n; k++) if (dev[order[k]!]! < dev[order[k - 1]!]! + bytes[order[k - 1]!]!) return; // ranges overlap
    }
    let at = 0;
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      this.at[i] = at;
      at += bytes[i]!;
    }
    this.placed = true;
  }

  /** The address of a JS buffer's first byte, asked of the backend once per buffer in a run of segments. */
  adopt(backend: Backend, ab: ArrayBuffer): number {
    if (ab !== this.lastBuffer) {
      this.lastBase = backend.adoptHostBuffer(ab);
      this.lastBuffer = ab;
      this.adopted[this.adoptedCount++] = this.lastBase;
    }
    return this.lastBase;
  }

  /** Empties the list for the next chunk, giving back the buffers it placed (and dropping its references). */
  clear(backend: Backend): void {
    for (let i = 0; i < this.adoptedCount; i++) backend.releaseHostBuffer(this.adopted[i]!);
    this.adoptedCount = 0;
    this.lastBuffer = undefined;
    for (let i = 0; i < this.count; i++) this.forget(i);
    this.transfers.length = 0;
    this.transferBytes.length = 0;
    this.count = 0;
    this.total = 0;
    this.placed = false;
  }
}
