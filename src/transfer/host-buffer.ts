/**
 * The host side of a transfer: an ordinary JS buffer (ArrayBuffer, typed array, DataView, Node Buffer) or a host
 * allocation (pageable, pinned, mapped), resolved to an address range the backend can read, checked once.
 */
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Address, Backend } from '../backend/backend.js';
import { Allocation } from '../memory/allocation.js';
import { checkRange, checkSize } from '../memory/validate.js';

/** Host memory a transfer reads or writes. */
export type HostBuffer = ArrayBuffer | ArrayBufferView | Allocation;

/** A host buffer resolved to addresses, held for the transfer's duration. */
export interface ResolvedHost {
  /** The allocation, when the buffer is one (held busy during the transfer). */
  allocation: Allocation | undefined;
  /** Address of the buffer's first byte (after the view's own offset). */
  address: Address;
  /** Bytes of the buffer (the view's length). */
  bytes: number;
  /** pinned / mapped memory can be copied from directly; pageable cannot. */
  kind: 'pageable' | 'pinned' | 'mapped' | 'registered';
  /** The whole buffer (its ArrayBuffer or allocation): transfers touching the same buffer share it (the hazard check). */
  key: object;
  /** The address of the key's first byte. */
  keyBase: number;
  /** Gives back what resolving took (the backend's record of an adopted buffer). */
  release(): void;
}

/**
 * Resolves a host buffer argument.
 * @throws InvalidArgumentError for anything else (a SharedArrayBuffer, device memory, a detached buffer).
 */
export function resolveHost(backend: Backend, buffer: HostBuffer, what: string): ResolvedHost {
  if (buffer instanceof Allocation) {
    buffer.assertLive(what);
    if (buffer.owner.backend !== backend) throw new InvalidArgumentError(`${what}: the allocation belongs to another runtime`, ErrorCode.FOREIGN_ADDRESS);
    if (buffer.kind === 'device' || buffer.kind === 'managed') {
      throw new InvalidArgumentError(`${what}: expected host memory (a buffer, or a pageable, pinned or mapped allocation), got ${buffer.kind} memory`);
    }
    const registered = buffer.kind === 'pageable' && (buffer as { isRegistered?: boolean }).isRegistered === true;
    const kind = buffer.kind === 'pageable' ? (registered ? 'registered' : 'pageable') : buffer.kind;
    return { allocation: buffer, address: buffer.address, bytes: buffer.bytes, kind, key: buffer, keyBase: buffer.address, release: () => {} };
  }
  if (typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer) {
    throw new InvalidArgumentError(
      `${what}: a SharedArrayBuffer cannot be transferred (its address is not exposed): copy it into an ArrayBuffer or use allocPageable`,
    );
  }
  let ab: ArrayBufferLike;
  let offset = 0;
  let length: number;
  if (buffer instanceof ArrayBuffer) {
    ab = buffer;
    length = buffer.byteLength;
  } else if (ArrayBuffer.isView(buffer)) {
    ab = buffer.buffer;
    offset = buffer.byteOffset;
    length = buffer.byteLength;
  } else {
    throw new InvalidArgumentError(`${what}: expected an ArrayBuffer, a typed array, a DataView or a host allocation, got ${typeof buffer}`);
  }
  if (!(ab instanceof ArrayBuffer)) {
    throw new InvalidArgumentError(
      `${what}: a SharedArrayBuffer cannot be transferred (its address is not exposed): copy it into an ArrayBuffer or use allocPageable`,
    );
  }
  if (ab.byteLength === 0 || length === 0) throw new InvalidArgumentError(`${what}: the buffer is empty (or detached)`, ErrorCode.INVALID_SIZE);
  const base = backend.adoptHostBuffer(ab);
  return {
    allocation: undefined,
    address: base + offset,
    bytes: length,
    kind: 'pageable',
    key: ab,
    keyBase: base,
    release: () => backend.releaseHostBuffer(base),
  };
}

/** Checks the range `[offset, offset + bytes)` of a transfer's side of `size` bytes; answers `bytes`. */
export function checkTransferRange(offset: number | undefined, bytes: number | undefined, size: number, what: string): { offset: number; bytes: number } {
  const o = checkRange(offset ?? 0, 0, size, what);
  const n = bytes === undefined ? size - o : checkSize(bytes, what);
  if (n === 0) throw new InvalidArgumentError(`${what}: nothing to transfer (the offset is at the end)`, ErrorCode.INVALID_SIZE);
  checkRange(o, n, size, what);
  return { offset: o, bytes: n };
}
