/**
 * The items of one call, checked straight into the engine's queue (stager.ts): rt.upload's one item, a list's
 * thousands. Each item costs a few comparisons and one row of the queue's columns; no object is made for it. What
 * an item's check needs only once per memory is done once per run of items that share it (the device allocation a
 * list fills), and every message is built only when a check fails, by the same checks that always said what was
 * wrong (resolveDeviceSide, resolveHost, checkTransferRange). A JS buffer's address is not asked for here: the
 * engine asks when the piece enters a chunk, off the call's path. The call's transfers (one per path mode) are made
 * here, and the call settles once each has finished.
 */
import { InvalidArgumentError } from '../errors.js';
import { Allocation } from '../memory/allocation.js';
import type { MemoryRef } from '../memory/copy.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { Stream } from '../stream/stream.js';
import type { Flow, Transfer, TransferOwner } from './flow.js';
import { checkTransferRange, resolveHost, type HostBuffer } from './host-buffer.js';
import { PIECE } from './piece-queue.js';
import { choosePath, resolveDeviceSide } from './stager-checks.js';
import type { DownloadItem, TransferPath, UploadItem } from './transfer-types.js';

/** The memory paths an item can take, by code (the index). */
export const ITEM_PATHS: readonly TransferPath[] = ['staged', 'direct', 'registered', 'pinned'];
const STAGED = 0;
const DIRECT = 1;

const noop = (): void => {};

/** An item's offsets and length (rt.upload's options, a list's item). */
export interface ItemRange {
  srcOffset?: number | undefined;
  dstOffset?: number | undefined;
  bytes?: number | undefined;
}

/** What a call is: its direction and name, the path asked, where its copies go, and how many items it has. */
export interface CallShape {
  direction: 'upload' | 'download';
  /** The call's name in messages ("upload", "uploadMany"); a list's messages also name the item. */
  name: string;
  list: boolean;
  asked: 'auto' | 'staged' | 'direct';
  stream: Stream;
  signal: AbortSignal | undefined;
  /** Items the call has (room for their path codes). */
  items: number;
  /** An item smaller than this that finds the stager idle goes as one runtime copy (0: none does). */
  smallBelow: number;
}

/** What a stager gives every call's items: its runtime, device and flow, and what it does when a call settles. */
export interface CallSite {
  readonly rt: MemoryRuntime;
  readonly device: number;
  readonly flow: Flow;
  /** Runs once per call, when every transfer of it has finished and its holds are given back. */
  settled(items: CallItems, error: unknown): void;
}

/**
 * One call's items. A call in flight keeps only this, its transfers and its promise (thousands of rt.upload calls
 * may be in flight at once, and what they keep is what the collector has to move): no closure per call.
 */
export class CallItems implements TransferOwner {
  count = 0;
  bytes = 0;
  /** An item went through the ring. */
  staged = false;
  /** Chunks that carried the call's items (set when it settles). */
  chunks = 0;
  /** When the call was made, and how it settles (set by the caller's promise). */
  t0 = 0;
  resolve: (value: never) => void = noop;
  reject: (error: unknown) => void = noop;
  readonly direction: 'upload' | 'download';
  readonly list: boolean;
  private readonly name: string;
  private readonly asked: 'auto' | 'staged' | 'direct';
  private readonly stream: Stream;
  private readonly signal: AbortSignal | undefined;
  private readonly smallBelow: number;
  /** Path code per item (ITEM_PATHS); for a single item, `firstCode` only. */
  private readonly codes: Uint8Array | undefined;
  private firstCode = 0;
  /** The call's transfers: its staged items, its direct ones (made on first use). */
  private staged1: Transfer | undefined;
  private direct1: Transfer | undefined;
  private open = 0;
  private failure: unknown;
  /** The allocations the items hold until the call settles (the first kept apart: a single call makes no array). */
  private held1: Allocation | undefined;
  private held: Allocation[] | undefined;
  private lastRef: MemoryRef | undefined;
  private lastAllocation: Allocation | undefined;
  private lastOffset = 0;
  /** The host side of the item being added (resolveHostSide): its address (or offset in a JS buffer), size, key, flags, path code (-1: pageable). */
  private hostAddress = 0;
  private hostBytes = 0;
  private hostKey: object = this;
  private hostKeyBase = 0;
  private hostFlags = 0;
  private hostCode = -1;

  constructor(
    private readonly site: CallSite,
    call: CallShape,
  ) {
    this.direction = call.direction;
    this.name = call.name;
    this.list = call.list;
    this.asked = call.asked;
    this.stream = call.stream;
    this.signal = call.signal;
    this.smallBelow = call.smallBelow;
    this.codes = call.items > 1 ? new Uint8Array(call.items) : undefined;
  }

  /**
   * Checks one item and queues its piece.
   * @throws InvalidArgumentError (naming the item in a list), DisposedError, as the memory's own checks say.
   */
  add(devRef: MemoryRef, hostBuf: HostBuffer, o: ItemRange): void {
    const up = this.direction === 'upload';
    const index = this.count;
    if (devRef !== this.lastRef || this.lastAllocation === undefined) this.resolveDevice(devRef, index);
    const a = this.lastAllocation!;
    this.resolveHostSide(hostBuf, index, up);
    const hostBytes = this.hostBytes;
    // The ranges: a few comparisons; where one fails, the full check says what is wrong (and throws).
    const hostOffset = up ? o.srcOffset : o.dstOffset;
    const devOffset = up ? o.dstOffset : o.srcOffset;
    let hostAt = offsetIn(hostOffset, hostBytes);
    let bytes = o.bytes ?? hostBytes - hostAt;
    if (hostAt < 0 || !fits(bytes, hostBytes - hostAt)) {
      ({ offset: hostAt, bytes } = checkTransferRange(hostOffset, o.bytes, hostBytes, this.label(index, up ? 'source' : 'destination')));
    }
    const devSize = a.bytes - this.lastOffset;
    let devAt = offsetIn(devOffset, devSize);
    if (devAt < 0 || !fits(bytes, devSize - devAt))
      devAt = checkTransferRange(devOffset, bytes, devSize, this.label(index, up ? 'destination' : 'source')).offset;
    const code = this.hostCode >= 0 ? this.hostCode : this.pageablePath(bytes);
    const t = this.transferFor(code === STAGED ? 'staged' : 'direct');
    t.left += bytes;
    const flags = this.hostFlags | (a.kind === 'managed' ? PIECE.MANAGED : 0);
    this.site.flow.push(t, this.hostAddress + hostAt, a.address + this.lastOffset + devAt, bytes, flags, this.hostKey, this.hostKeyBase);
    if (this.codes) this.codes[index] = code;
    else this.firstCode = code;
    this.staged ||= code === STAGED;
    this.bytes += bytes;
    this.count++;
  }

  /**
   * Checks a list's items and queues their pieces, in one loop: an item whose device side is the memory of the item
   * before it and whose host side is a JS buffer costs a few loads and comparisons and one row of the queue; any
   * other item, and any item a comparison here refuses, goes through {@link add}, whose checks resolve it or say
   * what is wrong (so a list is refused with the same error, naming the same item, either way).
   * @throws InvalidArgumentError (naming the item), DisposedError, as {@link add}.
   */
  addList(list: readonly unknown[]): void {
    const n = list.length;
    // A list of one may go as a runtime copy (pageablePath asks the flow): add decides that.
    if (n === 1 || this.codes === undefined) {
      this.addItem(list[0], 0);
      for (let i = 1; i < n; i++) this.addItem(list[i], i);
      return;
    }
    const up = this.direction === 'upload';
    const flow = this.site.flow;
    const codes = this.codes;
    // Pageable memory in a list goes as asked, else staged (pageablePath: a list's smallBelow is 0).
    const code = this.asked === 'direct' ? DIRECT : STAGED;
    let t: Transfer | undefined;
    // Room for a row per item, written here column by column (an item that goes through add() pushes its own row
    // into the same room): no growth, no call per row. The bytes of these rows are counted once, at the end.
    const q = flow.reserve(n);
    const qHost = q.host;
    const qDev = q.dev;
    const qBytes = q.bytes;
    const qKeyBase = q.keyBase;
    const qFlags = q.flags;
    const qKey = q.key;
    const qTransfer = q.transfer;
    // The device side of the last run of items, as resolved for its reference (an address may name a place inside an
    // allocation: two references, one allocation, two offsets).
    let ref: unknown;
    let devBase = 0;
    let devSize = 0;
    let flags = 0;
    let total = 0;
    try {
      for (let i = 0; i < n; i++) {
        const it = list[i] as { dst?: unknown; src?: unknown; srcOffset?: unknown; dstOffset?: unknown; bytes?: unknown } | null | undefined;
        if (typeof it !== 'object' || it === null) {
          this.addItem(it, i);
          ref = undefined;
          continue;
        }
        const devRef = up ? it.dst : it.src;
        const h = up ? it.src : it.dst;
        if (ref !== devRef) {
          if (devRef !== this.lastRef || this.lastAllocation === undefined || !ArrayBuffer.isView(h)) {
            this.addItem(it, i);
            ref = undefined;
            continue;
          }
          const a = this.lastAllocation;
          ref = devRef;
          devBase = a.address + this.lastOffset;
          devSize = a.bytes - this.lastOffset;
          flags = PIECE.BUFFER | (a.kind === 'managed' ? PIECE.MANAGED : 0);
        } else if (!ArrayBuffer.isView(h)) {
          this.addItem(it, i);
          ref = undefined;
          continue;
        }
        const ab = h.buffer;
        // A Uint8Array's length is its byte length, and a far cheaper read on Node 20 (about 1.5 ns against 13 for
        // byteLength, which is not inlined there; a detached array reads 0 either way).
        const hostBytes = h instanceof Uint8Array ? h.length : h.byteLength;
        const hostOffset = up ? it.srcOffset : it.dstOffset;
        const devOffset = up ? it.dstOffset : it.srcOffset;
        const hostAt = offsetIn(hostOffset as number | undefined, hostBytes);
        const bytes = it.bytes === undefined ? hostBytes - hostAt : it.bytes;
        const devAt = offsetIn(devOffset as number | undefined, devSize);
        if (!(ab instanceof ArrayBuffer) || hostAt < 0 || devAt < 0 || !fits(bytes, hostBytes - hostAt) || !fits(bytes, devSize - devAt)) {
          this.addItem(it, i);
          ref = undefined;
          continue;
        }
        t ??= this.transferFor(code === STAGED ? 'staged' : 'direct');
        const r = q.tail++;
        // A view of the whole buffer starts at its first byte (byteOffset, not inlined on Node 20, is read for the others).
        qHost[r] = (hostBytes === ab.byteLength ? 0 : h.byteOffset) + hostAt;
        qDev[r] = devBase + devAt;
        qBytes[r] = bytes as number;
        qKeyBase[r] = 0;
        qFlags[r] = flags;
        qKey[r] = ab;
        qTransfer[r] = t;
        codes[i] = code;
        total += bytes as number;
        this.count++;
      }
    } finally {
      // Counted whether or not the list is refused (refuse() takes back every row the call queued, and their bytes).
      flow.pushed(total);
      if (t) t.left += total;
      this.bytes += total;
    }
    this.staged ||= t !== undefined && code === STAGED;
  }

  /** One item through {@link add}; a list's item that is not an object is refused by name. */
  private addItem(it: unknown, index: number): void {
    if (!it || typeof it !== 'object') throw new InvalidArgumentError(`${this.name}: item ${index} is not an object`);
    const o = it as UploadItem & DownloadItem;
    if (this.direction === 'upload') this.add(o.dst, o.src, o);
    else this.add(o.src, o.dst, o);
  }

  /** Takes the call's items back out of the queue and gives back what they held (a list refused whole). */
  refuse(): void {
    this.site.flow.takeBack(this.count);
    this.release();
  }

  /** The path of the call: 'staged' when any item went through the ring, else the first item's. */
  get path(): TransferPath {
    return this.staged ? 'staged' : ITEM_PATHS[this.firstCode]!;
  }

  /** The path codes of a list's items (ITEM_PATHS), in the list's order. */
  get pathCodes(): Uint8Array {
    return this.codes ?? Uint8Array.of(this.firstCode);
  }

  /**
   * The host side of an item, into the host* fields (no object per item): a JS buffer in a few reads, its address
   * left to the engine (PIECE.BUFFER); anything else (an allocation, or what is refused) as resolveHost says.
   */
  private resolveHostSide(hostBuf: HostBuffer, index: number, up: boolean): void {
    let ab: ArrayBufferLike | undefined;
    let viewOffset = 0;
    let length = 0;
    if (ArrayBuffer.isView(hostBuf)) {
      ab = hostBuf.buffer;
      viewOffset = hostBuf.byteOffset;
      length = hostBuf.byteLength;
    } else if (hostBuf instanceof ArrayBuffer) {
      ab = hostBuf;
      length = hostBuf.byteLength;
    }
    if (ab instanceof ArrayBuffer && length > 0) {
      this.hostAddress = viewOffset;
      this.hostBytes = length;
      this.hostKey = ab;
      this.hostKeyBase = 0;
      this.hostFlags = PIECE.BUFFER;
      this.hostCode = -1;
      return;
    }
    const host = resolveHost(this.site.rt.backend, hostBuf, this.label(index, up ? 'source' : 'destination'));
    host.release(); // an allocation's resolution holds nothing beyond the allocation itself
    const pinned = host.kind !== 'pageable';
    this.hostAddress = host.address;
    this.hostBytes = host.bytes;
    this.hostKey = host.key;
    this.hostKeyBase = host.keyBase;
    this.hostFlags = pinned ? PIECE.PINNED : 0;
    this.hostCode = pinned ? ITEM_PATHS.indexOf(choosePath(host, this.asked, false)) : -1;
    if (host.allocation) this.hold(host.allocation);
  }

  /** The device memory of an item, resolved and checked (a run of items into the same memory does this once). */
  private resolveDevice(ref: MemoryRef, index: number): void {
    let allocation: Allocation;
    let offset = 0;
    const r = this.site.rt;
    if (
      ref instanceof Allocation &&
      ref.owner.backend === r.backend &&
      !ref.disposed &&
      ref.device === this.site.device &&
      (ref.kind === 'device' || ref.kind === 'managed')
    ) {
      allocation = ref;
    } else {
      ({ allocation, offset } = resolveDeviceSide(r, this.site.device, ref, this.label(index, this.direction === 'upload' ? 'destination' : 'source')));
    }
    this.lastRef = ref;
    this.lastAllocation = allocation;
    this.lastOffset = offset;
    this.hold(allocation);
  }

  /** The path of pageable memory: as asked, else direct when small and alone (one runtime copy), else staged. */
  private pageablePath(bytes: number): number {
    const asked = this.asked;
    if (asked === 'direct') return DIRECT;
    if (asked === 'staged') return STAGED;
    return bytes < this.smallBelow && this.site.flow.idle ? DIRECT : STAGED;
  }

  /** The call's transfer of a mode, made on first use. */
  private transferFor(mode: 'staged' | 'direct'): Transfer {
    let t = mode === 'staged' ? this.staged1 : this.direct1;
    if (t === undefined) {
      t = {
        direction: this.direction,
        mode,
        stream: this.stream,
        signal: this.signal,
        left: 0,
        chunks: 0,
        inFlight: 0,
        failed: undefined,
        settled: false,
        owner: this,
      };
      if (mode === 'staged') this.staged1 = t;
      else this.direct1 = t;
      this.open++;
    }
    return t;
  }

  /** A transfer of the call finished; the last one settles the call. */
  transferFinished(_t: Transfer, error: unknown): void {
    if (error !== undefined && this.failure === undefined) this.failure = error;
    if (--this.open > 0) return;
    this.chunks = (this.staged1?.chunks ?? 0) + (this.direct1?.chunks ?? 0);
    this.release();
    this.site.settled(this, this.failure);
  }

  /** Gives back the allocations the items held. */
  private release(): void {
    this.held1?.unhold();
    if (this.held) for (const a of this.held) a.unhold();
    this.held1 = this.held = undefined;
  }

  /** Holds an allocation until the call settles (once for a run of items in the same one). */
  private hold(a: Allocation): void {
    const last = this.held ? this.held[this.held.length - 1] : this.held1;
    if (last === a) return;
    a.hold();
    if (this.held1 === undefined) this.held1 = a;
    else (this.held ??= []).push(a);
  }

  /** "uploadMany: item 3 destination", "upload source": built only for a message. */
  private label(index: number, side: string): string {
    return this.list ? `${this.name}: item ${index} ${side}` : `${this.name} ${side}`;
  }
}

/** A valid offset into `size` bytes that leaves at least one byte (0 when undefined), else -1. */
function offsetIn(offset: number | undefined, size: number): number {
  if (offset === undefined) return size > 0 ? 0 : -1;
  return typeof offset === 'number' && Number.isInteger(offset) && offset >= 0 && offset < size ? offset : -1;
}

/** A whole, positive byte count of at most `room`. */
function fits(bytes: unknown, room: number): boolean {
  return typeof bytes === 'number' && Number.isInteger(bytes) && bytes >= 1 && bytes <= room;
}
