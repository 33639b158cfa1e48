/**
 * Many copies enqueued together: one native call where the runtime has one (cudaMemcpyBatchAsync from CUDA 12.8,
 * hipMemcpyBatchAsync from ROCm 7.1), one memcpyAsync per copy elsewhere. The copies of a batch may run in any order
 * and at once, so every copy is checked against its allocations and against every other copy of the batch (no
 * destination may overlap another copy's source or destination) before anything is enqueued.
 *
 * Checking is the cost a batch adds on the host: it works in typed arrays, allocates one small object per batch
 * rather than per copy, and checks overlaps in one pass when the copies come in address order (the usual case),
 * sorting only when they do not. A program that enqueues the same batch every step (the same array, its copies
 * naming the same allocations, offsets and sizes) pays it once: {@link BatchMemo} compares each copy's five fields
 * with the ones checked before, which is sound because the checks depend on nothing else but the memory still
 * being live (checked on every run) and the stream.
 */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { BatchLocation, BatchOutcome, CopyKind, NativeCopyBatch } from '../backend/backend.js';
import { Allocation, isGenuine } from '../memory/allocation.js';
import { copyDirection, type MemoryRef } from '../memory/copy.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import { checkRange, checkSize } from '../memory/validate.js';
import type { Stream } from '../stream/stream.js';

/** One copy of a batch: as `rt.copy`'s arguments. */
export interface BatchCopy {
  dst: MemoryRef;
  src: MemoryRef;
  bytes?: number;
  dstOffset?: number;
  srcOffset?: number;
}

/** What a batch did. */
export interface BatchResult {
  copies: number;
  bytes: number;
  /** Native calls made: 1 for a batch call (plus one per copy the batch call cannot take), else one per copy. */
  nativeCalls: number;
  /** 'batch' when the runtime's batch call carried the copies, 'loop' when they went one by one. */
  path: 'batch' | 'loop';
  /** How the batch call was made: one attribute per run of copies, or none (ROCm 7.1 to 7.12 refuse any). */
  attributes?: 'per-run' | 'none' | undefined;
  /** Why the copies did not go the first way tried (the runtime refused it), when they did not. */
  note?: string | undefined;
}

/** A batch checked once, to enqueue many times. */
export interface PreparedBatch {
  readonly copies: number;
  readonly bytes: number;
  /** Enqueues the batch on `stream` (or the stream it was prepared with); checks only that the memory is still live. */
  run(stream?: Stream): BatchResult;
}

const U32 = 2 ** 32;
/** Operand kinds for the batch call: device memory, host memory the runtime allocated, or memory it is not given. */
const DEVICE = 1;
const HOST = 2;
const OTHER = 3;

function operandKind(a: Allocation): number {
  return a.kind === 'device' ? DEVICE : a.kind === 'pinned' || a.kind === 'mapped' ? HOST : OTHER;
}

/**
 * Checks the copies of a batch and packs them for the native call.
 * @throws InvalidArgumentError (sizes, bounds, WRONG_DEVICE, an overlap between copies), DisposedError
 */
export function planBatch(rt: MemoryRuntime, copies: readonly BatchCopy[], stream: Stream): PreparedBatch {
  rt.assertOpen();
  if (!Array.isArray(copies)) throw new InvalidArgumentError('copyBatch: expected an array of copies');
  const n = copies.length;
  if (n === 0) throw new InvalidArgumentError('copyBatch: the batch is empty', ErrorCode.INVALID_SIZE);
  rt.checkStream(stream);
  if (stream.isDefault) throw new InvalidArgumentError('copyBatch: give a created stream (batch calls cannot use the legacy default stream)');
  const backend = rt.backend;
  const dstAddr = new Float64Array(n);
  const srcAddr = new Float64Array(n);
  const size = new Float64Array(n);
  const dsts: Allocation[] = new Array(n);
  const srcs: Allocation[] = new Array(n);
  const eligible = new Uint8Array(n);
  let batchable = 0;
  let total = 0;
  const canBatch = backend.capabilities.batchCopies;
  let i = 0;
  try {
    // Constant labels in the loop (a label built per copy costs more than the checks); the index is added on a refusal.
    for (; i < n; i++) {
      const c = copies[i];
      if (!c || typeof c !== 'object') throw new InvalidArgumentError('is not an object');
      let d: Allocation;
      let dBase = 0;
      if (c.dst instanceof Allocation && isGenuine(c.dst) && c.dst.owner.backend === backend) {
        d = c.dst;
        if (d.disposed) d.assertLive('destination');
      } else {
        const r = rt.resolve(c.dst, 'destination');
        d = r.allocation;
        dBase = r.offset;
      }
      let s: Allocation;
      let sBase = 0;
      if (c.src instanceof Allocation && isGenuine(c.src) && c.src.owner.backend === backend) {
        s = c.src;
        if (s.disposed) s.assertLive('source');
      } else {
        const r = rt.resolve(c.src, 'source');
        s = r.allocation;
        sBase = r.offset;
      }
      const so = sBase + (c.srcOffset === undefined ? 0 : checkRange(c.srcOffset, 0, s.bytes, 'source'));
      const dO = dBase + (c.dstOffset === undefined ? 0 : checkRange(c.dstOffset, 0, d.bytes, 'destination'));
      const bytes = c.bytes === undefined ? s.bytes - so : checkSize(c.bytes, 'size');
      if (bytes === 0) throw new InvalidArgumentError('nothing to copy (the source offset is at its end)', ErrorCode.INVALID_SIZE);
      checkRange(so, bytes, s.bytes, 'source');
      checkRange(dO, bytes, d.bytes, 'destination');
      if (d.kind === 'device' && s.kind === 'device' && d.device !== s.device) {
        throw new InvalidArgumentError('goes between two devices (use rt.copy for peer copies)', ErrorCode.WRONG_DEVICE);
      }
      if ((d.kind === 'device' && d.device !== stream.device) || (s.kind === 'device' && s.device !== stream.device)) {
        throw new InvalidArgumentError(
          `touches device ${d.kind === 'device' ? d.device : s.device} but the stream belongs to device ${stream.device}`,
          ErrorCode.WRONG_DEVICE,
        );
      }
      const da = d.address + dO;
      const sa = s.address + so;
      // A copy's own ranges overlapping: the copy engines read and write in no set order, so the result is undefined.
      if (da < sa + bytes && sa < da + bytes)
        throw new InvalidArgumentError('its destination overlaps its own source (copy through another buffer)', ErrorCode.OUT_OF_BOUNDS);
      dsts[i] = d;
      srcs[i] = s;
      dstAddr[i] = da;
      srcAddr[i] = sa;
      size[i] = bytes;
      total += bytes;
      if (canBatch && operandKind(d) !== OTHER && operandKind(s) !== OTHER) {
        eligible[i] = 1;
        batchable++;
      }
    }
  } catch (e) {
    if (e instanceof Error) e.message = `copyBatch: copy ${i}: ${e.message}`;
    throw e;
  }
  checkOverlaps(dstAddr, srcAddr, size);
  const packed = batchable > 0 ? pack(dsts, srcs, dstAddr, srcAddr, size, eligible, batchable) : undefined;
  const loose: number[] = [];
  for (let i = 0; i < n; i++) if (!eligible[i]) loose.push(i);
  const looseKinds = loose.map((i) => copyDirection(dsts[i]!, srcs[i]!).kind as CopyKind);
  const fixed = stream;
  let outcome: BatchOutcome | undefined;
  let said: BatchResult | undefined;
  const result: BatchResult = { copies: n, bytes: total, nativeCalls: (packed ? 1 : 0) + loose.length, path: packed ? 'batch' : 'loop' };
  return {
    copies: n,
    bytes: total,
    run: (on: Stream = fixed): BatchResult => {
      if (on !== fixed) {
        rt.checkStream(on);
        if (on.device !== fixed.device)
          throw new InvalidArgumentError(`copyBatch: the batch was checked for device ${fixed.device}'s stream`, ErrorCode.WRONG_DEVICE);
      }
      on.assertLive('copyBatch');
      for (let i = 0; i < n; i++) {
        if (dsts[i]!.disposed) dsts[i]!.assertLive(`copy ${i} destination`);
        if (srcs[i]!.disposed) srcs[i]!.assertLive(`copy ${i} source`);
      }
      let r = result;
      if (packed) {
        const o = backend.memcpyBatchAsync(packed, on.handle);
        // The backend answers one object per way, so a prepared batch builds its result once per way.
        if (o !== outcome || !said) [outcome, said] = [o, withOutcome(result, o, batchable, loose.length)];
        r = said;
      }
      for (let k = 0; k < loose.length; k++) {
        const i = loose[k]!;
        backend.memcpyAsync(dstAddr[i]!, srcAddr[i]!, size[i]!, looseKinds[k]!, on.handle);
      }
      return r;
    },
  };
}

/** A batch's result as the backend's batch call went: the way, the attributes, and the native calls it took. */
function withOutcome(base: BatchResult, o: BatchOutcome, batched: number, loose: number): BatchResult {
  const calls = o.path === 'loop' ? batched : Math.ceil(batched / (o.copiesPerCall ?? batched));
  const r: BatchResult = { ...base, path: o.path, nativeCalls: calls + loose };
  if (o.attributes) r.attributes = o.attributes;
  if (o.note) r.note = o.note;
  return r;
}

/** Packs the batch call's copies: 64-bit addresses and sizes as 32-bit halves, runs of equal operand locations. */
function pack(
  dsts: readonly Allocation[],
  srcs: readonly Allocation[],
  dstAddr: Float64Array,
  srcAddr: Float64Array,
  size: Float64Array,
  eligible: Uint8Array,
  count: number,
): NativeCopyBatch {
  const d32 = new Uint32Array(2 * count);
  const s32 = new Uint32Array(2 * count);
  const n32 = new Uint32Array(2 * count);
  const runs: Array<{ first: number; src: BatchLocation; dst: BatchLocation }> = [];
  let lastSrc = -1;
  let lastDst = -1;
  let j = 0;
  for (let i = 0; i < eligible.length; i++) {
    if (!eligible[i]) continue;
    const a = dstAddr[i]!;
    const b = srcAddr[i]!;
    const z = size[i]!;
    d32[2 * j] = a % U32;
    d32[2 * j + 1] = (a / U32) >>> 0;
    s32[2 * j] = b % U32;
    s32[2 * j + 1] = (b / U32) >>> 0;
    n32[2 * j] = z % U32;
    n32[2 * j + 1] = (z / U32) >>> 0;
    // A run's key: operand kind and device, for the source and the destination.
    const sk = operandKind(srcs[i]!) * 1024 + (srcs[i]!.device ?? 0);
    const dk = operandKind(dsts[i]!) * 1024 + (dsts[i]!.device ?? 0);
    if (sk !== lastSrc || dk !== lastDst) {
      runs.push({ first: j, src: locationOf(srcs[i]!), dst: locationOf(dsts[i]!) });
      lastSrc = sk;
      lastDst = dk;
    }
    j++;
  }
  return { count, dsts: d32, srcs: s32, sizes: n32, runs };
}

function locationOf(a: Allocation): BatchLocation {
  return a.kind === 'device' ? { type: 'device', device: a.device! } : { type: 'host' };
}

/**
 * Refuses a batch in which a destination range overlaps another copy's destination or source (the copies run in any
 * order, so the result would depend on timing). A source may be read by several copies. (A copy whose destination
 * overlaps its own source was refused while the copies were checked.)
 */
function checkOverlaps(dst: Float64Array, src: Float64Array, size: Float64Array): void {
  const n = size.length;
  if (n < 2) return;
  if (ordered(dst, size) && ordered(src, size) && !crosses(dst, src, size)) return;
  sweep(dst, src, size);
}

/** True when the ranges come in increasing address order (equal starts allowed; overlaps are found later). */
function ordered(start: Float64Array, size: Float64Array): boolean {
  for (let i = 1; i < start.length; i++) if (start[i]! < start[i - 1]!) return false;
  return size.length > 0;
}

/**
 * With both lists in address order, one merge pass: true when a destination starts before some earlier range ends,
 * or a source before some earlier destination ends. That is every overlap the batch forbids, and a few it allows
 * (a copy's own source and destination): then the full sweep decides and names the copies.
 */
function crosses(dst: Float64Array, src: Float64Array, size: Float64Array): boolean {
  const n = size.length;
  let i = 0;
  let j = 0;
  let anyEnd = Number.NEGATIVE_INFINITY;
  let dstEnd = Number.NEGATIVE_INFINITY;
  while (i < n || j < n) {
    if (j >= n || (i < n && dst[i]! <= src[j]!)) {
      const start = dst[i]!;
      if (start < anyEnd) return true;
      const end = start + size[i]!;
      if (end > dstEnd) dstEnd = end;
      if (end > anyEnd) anyEnd = end;
      i++;
    } else {
      const start = src[j]!;
      if (start < dstEnd) return true;
      const end = start + size[j]!;
      if (end > anyEnd) anyEnd = end;
      j++;
    }
  }
  return false;
}

/** The general check: every range by start address, sorted, with the furthest ends seen so far. */
function sweep(dstAddr: Float64Array, srcAddr: Float64Array, size: Float64Array): void {
  const n = size.length;
  const starts = new Float64Array(2 * n);
  const ends = new Float64Array(2 * n);
  const order = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    starts[2 * i] = dstAddr[i]!;
    ends[2 * i] = dstAddr[i]! + size[i]!;
    starts[2 * i + 1] = srcAddr[i]!;
    ends[2 * i + 1] = srcAddr[i]! + size[i]!;
    order[2 * i] = 2 * i;
    order[2 * i + 1] = 2 * i + 1;
  }
  order.sort((a, b) => starts[a]! - starts[b]! || (a & 1) - (b & 1));
  // A range overlaps an earlier-starting range of another copy when that range ends after it starts. A destination
  // conflicts with any range of another copy, a source only with destinations.
  const dsts = new FurthestEnds();
  const any = new FurthestEnds();
  for (const r of order) {
    const copy = r >> 1;
    const isDst = (r & 1) === 0;
    const start = starts[r]!;
    const d = dsts.excluding(copy);
    if (start < d.end) throw overlap(d.owner, copy, isDst ? 'destination' : 'source');
    if (isDst) {
      const a = any.excluding(copy);
      if (start < a.end) throw overlap(copy, a.owner, 'range');
      dsts.add(ends[r]!, copy);
    }
    any.add(ends[r]!, copy);
  }
}

/** The furthest end seen, and the furthest end of any other owner: the furthest end of ranges not of a given copy. */
class FurthestEnds {
  private end1 = -1;
  private owner1 = -1;
  private end2 = -1;
  private owner2 = -1;

  add(end: number, owner: number): void {
    if (owner === this.owner1) {
      this.end1 = Math.max(this.end1, end);
    } else if (end > this.end1) {
      this.end2 = this.end1;
      this.owner2 = this.owner1;
      this.end1 = end;
      this.owner1 = owner;
    } else if (end > this.end2) {
      this.end2 = end;
      this.owner2 = owner;
    }
  }

  excluding(owner: number): { end: number; owner: number } {
    return owner === this.owner1 ? { end: this.end2, owner: this.owner2 } : { end: this.end1, owner: this.owner1 };
  }
}

function overlap(a: number, b: number, what: string): InvalidArgumentError {
  const [x, y] = a < b ? [a, b] : [b, a];
  return new InvalidArgumentError(
    `copyBatch: the destination of copy ${a} overlaps the ${what} of copy ${b} (copies ${x} and ${y}); the copies of a batch run in any order, so they must not overlap`,
    ErrorCode.OUT_OF_BOUNDS,
  );
}

/** The fields of a batch's copies as they were when checked, with the checked batch. */
interface Checked {
  stream: Stream;
  prepared: PreparedBatch;
  dst: MemoryRef[];
  src: MemoryRef[];
  bytes: Array<number | undefined>;
  dstOffset: Array<number | undefined>;
  srcOffset: Array<number | undefined>;
}

/**
 * The batches a runtime checked, by the array that held them: `copyBatch` with an array whose copies are unchanged
 * since their last check (same allocations, offsets, sizes and stream) runs the checked batch; any difference, or
 * a copy naming memory other than an allocation object, checks the batch again.
 */
export class BatchMemo {
  private readonly seen = new WeakMap<readonly BatchCopy[], Checked>();

  run(rt: MemoryRuntime, copies: readonly BatchCopy[], stream: Stream): BatchResult {
    const hit = Array.isArray(copies) ? this.seen.get(copies) : undefined;
    if (hit && hit.stream === stream && unchanged(hit, copies)) {
      rt.assertOpen();
      return hit.prepared.run();
    }
    const prepared = planBatch(rt, copies, stream);
    const n = copies.length;
    const c: Checked = { stream, prepared, dst: new Array(n), src: new Array(n), bytes: new Array(n), dstOffset: new Array(n), srcOffset: new Array(n) };
    let memo = true;
    for (let i = 0; i < n; i++) {
      const x = copies[i]!;
      if (!(x.dst instanceof Allocation) || !(x.src instanceof Allocation)) {
        memo = false;
        break;
      }
      c.dst[i] = x.dst;
      c.src[i] = x.src;
      c.bytes[i] = x.bytes;
      c.dstOffset[i] = x.dstOffset;
      c.srcOffset[i] = x.srcOffset;
    }
    if (memo) this.seen.set(copies, c);
    else this.seen.delete(copies);
    return prepared.run();
  }
}

function unchanged(c: Checked, copies: readonly BatchCopy[]): boolean {
  const n = copies.length;
  if (n !== c.dst.length) return false;
  for (let i = 0; i < n; i++) {
    const x = copies[i];
    if (!x || x.dst !== c.dst[i] || x.src !== c.src[i] || x.bytes !== c.bytes[i] || x.dstOffset !== c.dstOffset[i] || x.srcOffset !== c.srcOffset[i])
      return false;
  }
  return true;
}
