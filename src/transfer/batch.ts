/**
 * Many copies enqueued together: one native call where the runtime has one (cudaMemcpyBatchAsync from CUDA 12.8,
 * hipMemcpyBatchAsync from ROCm 7.1), one memcpyAsync per copy elsewhere. The copies of a batch may run in any order
 * and at once, so every copy is checked against its allocations and against every other copy of the batch (no
 * destination may overlap another copy's source or destination) before anything is enqueued.
 */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { BatchLocation, NativeCopyBatch } from '../backend/backend.js';
import type { Allocation } from '../memory/allocation.js';
import { type CopyOptions, type MemoryRef, type PlannedCopy, planCopy } from '../memory/copy.js';
import type { Runtime } from '../memory/runtime.js';
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
}

/** A batch checked once, to enqueue many times. */
export interface PreparedBatch {
  readonly copies: number;
  readonly bytes: number;
  /** Enqueues the batch on `stream` (or the stream it was prepared with); checks only that the memory is still live. */
  run(stream?: Stream): BatchResult;
}

/** Where an operand lives for the batch call's hints; undefined for memory the batch call is not given (pageable, managed). */
function location(a: Allocation): BatchLocation | undefined {
  if (a.kind === 'device') return { type: 'device', device: a.device! };
  if (a.kind === 'pinned' || a.kind === 'mapped') return { type: 'host' };
  return undefined;
}

const U32 = 2 ** 32;

function put(a: Uint32Array, i: number, v: number): void {
  a[2 * i] = v % U32;
  a[2 * i + 1] = Math.floor(v / U32);
}

/**
 * Checks the copies of a batch and packs them for the native call.
 * @throws InvalidArgumentError (sizes, bounds, WRONG_DEVICE, an overlap between copies), DisposedError
 */
export function planBatch(rt: Runtime, copies: readonly BatchCopy[], stream: Stream): PreparedBatch {
  rt.assertOpen();
  if (!Array.isArray(copies)) throw new InvalidArgumentError('copyBatch: expected an array of copies');
  if (copies.length === 0) throw new InvalidArgumentError('copyBatch: the batch is empty', ErrorCode.INVALID_SIZE);
  rt.checkStream(stream);
  if (stream.isDefault) throw new InvalidArgumentError('copyBatch: give a created stream (batch calls cannot use the legacy default stream)');
  const planned: PlannedCopy[] = new Array(copies.length);
  const options: CopyOptions = { stream };
  for (let i = 0; i < copies.length; i++) {
    const c = copies[i];
    if (!c || typeof c !== 'object') throw new InvalidArgumentError(`copyBatch: copy ${i} is not an object`);
    const d = rt.resolve(c.dst, `copy ${i} destination`);
    const s = rt.resolve(c.src, `copy ${i} source`);
    options.bytes = c.bytes;
    options.dstOffset = c.dstOffset;
    options.srcOffset = c.srcOffset;
    planned[i] = planCopy(d.allocation, d.offset, s.allocation, s.offset, options);
    if (planned[i]!.direction === 'PtoP')
      throw new InvalidArgumentError(`copyBatch: copy ${i} goes between two devices (use rt.copy for peer copies)`, ErrorCode.WRONG_DEVICE);
  }
  checkOverlaps(planned);
  // Copies the batch call takes, grouped in runs of equal operand locations; the others go one by one.
  const native = rt.backend.capabilities.batchCopies ? planned.filter((p) => location(p.dst) && location(p.src)) : [];
  const loose = native.length > 0 ? planned.filter((p) => !(location(p.dst) && location(p.src))) : planned;
  const packed = native.length > 0 ? pack(native) : undefined;
  const bytes = planned.reduce((sum, p) => sum + p.bytes, 0);
  const fixed = stream;
  return {
    copies: planned.length,
    bytes,
    run: (s?: Stream): BatchResult => {
      const on = s ?? fixed;
      if (on !== fixed) {
        rt.checkStream(on);
        for (const p of planned)
          if (p.dst.kind === 'device' && p.dst.device !== on.device)
            throw new InvalidArgumentError('copyBatch: the stream belongs to another device', ErrorCode.WRONG_DEVICE);
      }
      on.assertLive('copyBatch');
      for (let i = 0; i < planned.length; i++) {
        planned[i]!.dst.assertLive(`copy ${i} destination`);
        planned[i]!.src.assertLive(`copy ${i} source`);
      }
      if (packed) rt.backend.memcpyBatchAsync(packed, on.handle);
      for (const p of loose) rt.backend.memcpyAsync(p.dstAddress, p.srcAddress, p.bytes, p.kind, on.handle);
      return { copies: planned.length, bytes, nativeCalls: (packed ? 1 : 0) + loose.length, path: packed ? 'batch' : 'loop' };
    },
  };
}

/** Packs copies for the native call: 64-bit addresses and sizes as 32-bit halves, runs of equal locations. */
function pack(copies: readonly PlannedCopy[]): NativeCopyBatch {
  const n = copies.length;
  const dsts = new Uint32Array(2 * n);
  const srcs = new Uint32Array(2 * n);
  const sizes = new Uint32Array(2 * n);
  const runs: Array<{ first: number; src: BatchLocation; dst: BatchLocation }> = [];
  let key = '';
  for (let i = 0; i < n; i++) {
    const p = copies[i]!;
    put(dsts, i, p.dstAddress);
    put(srcs, i, p.srcAddress);
    put(sizes, i, p.bytes);
    const src = location(p.src)!;
    const dst = location(p.dst)!;
    const k = `${src.type}${src.type === 'device' ? src.device : ''}>${dst.type}${dst.type === 'device' ? dst.device : ''}`;
    if (k !== key) {
      runs.push({ first: i, src, dst });
      key = k;
    }
  }
  return { count: n, dsts, srcs, sizes, runs };
}

/**
 * Refuses a batch in which a destination range overlaps another copy's destination or source (the copies run in any
 * order, so the result would depend on timing). A source may be read by several copies.
 */
function checkOverlaps(planned: readonly PlannedCopy[]): void {
  const n = planned.length;
  // Ranges by device-side address space: device addresses and host addresses never alias in one process under UVA.
  const starts = new Float64Array(2 * n);
  const ends = new Float64Array(2 * n);
  const order = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const p = planned[i]!;
    starts[2 * i] = p.dstAddress;
    ends[2 * i] = p.dstAddress + p.bytes;
    starts[2 * i + 1] = p.srcAddress;
    ends[2 * i + 1] = p.srcAddress + p.bytes;
    order[2 * i] = 2 * i;
    order[2 * i + 1] = 2 * i + 1;
  }
  order.sort((a, b) => starts[a]! - starts[b]! || (a & 1) - (b & 1));
  // Sweep by start: a range overlaps an earlier-starting range of another copy when that range ends after it starts.
  // A destination conflicts with any range of another copy, a source only with destinations.
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
