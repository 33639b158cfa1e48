/** The checks every stager call shares, before anything is copied (stager.ts). */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Allocation } from '../memory/allocation.js';
import type { MemoryRef } from '../memory/copy.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { Stream } from '../stream/stream.js';
import type { ResolvedHost } from './host-buffer.js';
import type { TransferPath } from './transfer-types.js';

/** One side of a transfer in device or managed memory, checked. */
export interface DeviceSide {
  allocation: Allocation;
  offset: number;
}

/**
 * Checks a call's options: the stream (of this runtime and device), the path among `paths`, the signal. Answers the
 * stream given, if any.
 * @throws InvalidArgumentError, WRONG_DEVICE
 */
export function checkOptions(
  rt: MemoryRuntime,
  device: number,
  o: { stream?: Stream | undefined; signal?: AbortSignal | undefined; path?: string | undefined },
  what: string,
  paths: string[],
): Stream | undefined {
  if (o === null || typeof o !== 'object') throw new InvalidArgumentError(`${what}: options must be an object`);
  if (o.stream !== undefined) {
    rt.checkStream(o.stream);
    if (o.stream.device !== device) {
      throw new InvalidArgumentError(`the stream belongs to device ${o.stream.device}, the stager to device ${device}`, ErrorCode.WRONG_DEVICE);
    }
  }
  if (o.path !== undefined && !paths.includes(o.path)) throw new InvalidArgumentError(`${what}: path must be ${paths.join(', ')}; got ${String(o.path)}`);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new InvalidArgumentError(`${what}: signal: expected an AbortSignal`);
  return o.stream;
}

/**
 * The device or managed memory a transfer reads or writes, on the stager's device.
 * @throws InvalidArgumentError (FOREIGN_ADDRESS, WRONG_DEVICE, host memory), DisposedError
 */
export function resolveDeviceSide(rt: MemoryRuntime, device: number, ref: MemoryRef, what: string): DeviceSide {
  const { allocation, offset } = rt.resolve(ref, what);
  if (allocation.kind !== 'device' && allocation.kind !== 'managed') {
    throw new InvalidArgumentError(`${what}: expected device or managed memory, got ${allocation.kind} memory (copy between host buffers with rt.copy)`);
  }
  if (allocation.device !== device) {
    throw new InvalidArgumentError(`${what}: the memory belongs to device ${allocation.device}, the stager to device ${device}`, ErrorCode.WRONG_DEVICE);
  }
  return { allocation, offset };
}

/** The path of a memory transfer: pinned and registered memory as it is, pageable staged unless `direct` is asked (or `small`). */
export function choosePath(host: ResolvedHost, asked: 'auto' | 'staged' | 'direct', small: boolean): TransferPath {
  if (host.kind === 'pinned' || host.kind === 'mapped') return 'pinned';
  if (host.kind === 'registered') return 'registered';
  if (asked === 'direct') return 'direct';
  if (asked === 'staged') return 'staged';
  return small ? 'direct' : 'staged';
}
