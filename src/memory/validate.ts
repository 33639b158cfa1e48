/** Argument checks done in TypeScript before any native call. Each throws InvalidArgumentError with a stable code. */
import { ErrorCode, InvalidArgumentError } from '../errors.js';

/**
 * Checks that `bytes` is a whole, positive, finite byte count no larger than `max`.
 * @throws InvalidArgumentError (INVALID_SIZE)
 */
export function checkSize(bytes: unknown, what: string, options: { allowZero?: boolean; max?: number } = {}): number {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) {
    throw new InvalidArgumentError(`${what}: size must be a finite number of bytes, got ${describe(bytes)}`, ErrorCode.INVALID_SIZE);
  }
  if (!Number.isInteger(bytes)) throw new InvalidArgumentError(`${what}: size must be a whole number of bytes, got ${bytes}`, ErrorCode.INVALID_SIZE);
  if (bytes < 0) throw new InvalidArgumentError(`${what}: size must not be negative, got ${bytes}`, ErrorCode.INVALID_SIZE);
  if (bytes === 0 && !options.allowZero) throw new InvalidArgumentError(`${what}: size must be at least 1 byte`, ErrorCode.INVALID_SIZE);
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  if (bytes > max) throw new InvalidArgumentError(`${what}: size ${bytes} exceeds the largest allowed (${max})`, ErrorCode.INVALID_SIZE);
  return bytes;
}

/**
 * Checks an offset and length against an allocation's size.
 * @throws InvalidArgumentError (INVALID_SIZE, OUT_OF_BOUNDS)
 */
export function checkRange(offset: unknown, length: number, size: number, what: string): number {
  if (typeof offset !== 'number' || !Number.isInteger(offset) || offset < 0) {
    throw new InvalidArgumentError(`${what}: offset must be a non-negative whole number, got ${describe(offset)}`, ErrorCode.OUT_OF_BOUNDS);
  }
  if (offset > size || length > size - offset) {
    throw new InvalidArgumentError(`${what}: ${length} bytes at offset ${offset} reach past the end of a ${size}-byte allocation`, ErrorCode.OUT_OF_BOUNDS);
  }
  return offset;
}

/** Checks a whole number within [min, max]. */
export function checkInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be a whole number from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

/** Checks a power-of-two alignment. */
export function checkAlignment(alignment: unknown, what: string, min = 1): number {
  const a = checkInteger(alignment, `${what}: alignment`, min, 2 ** 40);
  if (!Number.isInteger(Math.log2(a))) throw new InvalidArgumentError(`${what}: alignment must be a power of two, got ${a}`);
  return a;
}

function describe(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'bigint') return `${v}n (a bigint; pass a number)`;
  if (v === undefined) return 'undefined';
  try {
    return `${typeof v} ${JSON.stringify(v)}`;
  } catch {
    return typeof v;
  }
}
