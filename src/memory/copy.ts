/**
 * Copies and fills between any two kinds of memory. The direction is inferred from the kinds, every range is
 * checked against both allocations, and a stream must belong to the device whose memory is touched.
 */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import { CopyKind } from '../backend/backend.js';
import type { Allocation } from './allocation.js';
import { checkRange, checkSize } from './validate.js';
import type { Stream } from '../stream/stream.js';

/** An allocation, or a raw address that must lie inside a live allocation of the same runtime. */
export type MemoryRef = Allocation | number;

export interface CopyOptions {
  /** Bytes to copy. Default: the rest of the source after srcOffset. */
  bytes?: number;
  dstOffset?: number;
  srcOffset?: number;
  /** Enqueue on this stream and return at once; without one the copy is synchronous. */
  stream?: Stream;
}

export interface FillOptions {
  bytes?: number;
  offset?: number;
  stream?: Stream;
}

/** Direction of a copy, as profilers name it. */
export type CopyDirection = 'HtoH' | 'HtoD' | 'DtoH' | 'DtoD' | 'PtoP' | 'managed';

/** Where a kind of memory lives, for choosing the copy kind. */
export function memorySide(a: Allocation): 'host' | 'device' | 'managed' {
  return a.kind === 'device' ? 'device' : a.kind === 'managed' ? 'managed' : 'host';
}

/** The direction and runtime copy kind for a copy from `src` to `dst`. */
export function copyDirection(dst: Allocation, src: Allocation): { direction: CopyDirection; kind: CopyKind } {
  const d = memorySide(dst);
  const s = memorySide(src);
  if (d === 'managed' || s === 'managed') return { direction: 'managed', kind: CopyKind.Default };
  if (s === 'host' && d === 'host') return { direction: 'HtoH', kind: CopyKind.HostToHost };
  if (s === 'host') return { direction: 'HtoD', kind: CopyKind.HostToDevice };
  if (d === 'host') return { direction: 'DtoH', kind: CopyKind.DeviceToHost };
  return dst.device === src.device ? { direction: 'DtoD', kind: CopyKind.DeviceToDevice } : { direction: 'PtoP', kind: CopyKind.DeviceToDevice };
}

/** A checked copy, ready for the backend. */
export interface PlannedCopy {
  dst: Allocation;
  src: Allocation;
  dstAddress: number;
  srcAddress: number;
  bytes: number;
  direction: CopyDirection;
  kind: CopyKind;
}

/**
 * Checks a copy's ranges and stream and works out its direction.
 * @throws InvalidArgumentError (INVALID_SIZE, OUT_OF_BOUNDS, WRONG_DEVICE), DisposedError
 */
export function planCopy(dst: Allocation, dstBase: number, src: Allocation, srcBase: number, options: CopyOptions): PlannedCopy {
  dst.assertLive('copy destination');
  src.assertLive('copy source');
  const dstOffset = dstBase + (options.dstOffset ?? 0);
  const srcOffset = srcBase + (options.srcOffset ?? 0);
  checkRange(srcOffset, 0, src.bytes, 'copy source');
  const bytes = options.bytes === undefined ? src.bytes - srcOffset : checkSize(options.bytes, 'copy');
  if (bytes === 0) throw new InvalidArgumentError('copy: nothing to copy (the source offset is at its end)', ErrorCode.INVALID_SIZE);
  checkRange(srcOffset, bytes, src.bytes, 'copy source');
  checkRange(dstOffset, bytes, dst.bytes, 'copy destination');
  const { direction, kind } = copyDirection(dst, src);
  if (options.stream) {
    const devices = [dst, src].filter((a) => a.kind === 'device').map((a) => a.device);
    if (devices.length > 0 && !devices.includes(options.stream.device)) {
      throw new InvalidArgumentError(
        `copy: the stream belongs to device ${options.stream.device} but the copy touches device ${devices.join(' and ')}`,
        ErrorCode.WRONG_DEVICE,
      );
    }
  }
  return { dst, src, dstAddress: dst.address + dstOffset, srcAddress: src.address + srcOffset, bytes, direction, kind };
}

/** Checks a fill's range and value. */
export function planFill(dst: Allocation, base: number, value: number, options: FillOptions): { address: number; bytes: number; offset: number } {
  dst.assertLive('fill');
  if (!Number.isInteger(value) || value < 0 || value > 255) throw new InvalidArgumentError(`fill: value must be a byte (0 to 255), got ${value}`);
  const offset = base + (options.offset ?? 0);
  checkRange(offset, 0, dst.bytes, 'fill');
  const bytes = options.bytes === undefined ? dst.bytes - offset : checkSize(options.bytes, 'fill');
  checkRange(offset, bytes, dst.bytes, 'fill');
  if (options.stream && dst.kind === 'device' && options.stream.device !== dst.device) {
    throw new InvalidArgumentError(`fill: the stream belongs to device ${options.stream.device}, the memory to device ${dst.device}`, ErrorCode.WRONG_DEVICE);
  }
  return { address: dst.address + offset, bytes, offset };
}
