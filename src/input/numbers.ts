/** Numbers out of untrusted records (JSON values, CSV cells, SQLite cells), with errors that say where. */
import { BadInputError } from '../errors.js';

/** Largest value accepted for a size or a timestamp: beyond it a trace is corrupt, not big. */
export const MAX_FIELD = 2 ** 63;

/**
 * A finite, non-negative number up to `max` from a JSON value or CSV cell (decimal or 0x hex); `undefined` for a
 * missing or empty one.
 * @throws BadInputError when present but not such a number.
 */
export function optNumber(v: unknown, what: string, file: string, max = MAX_FIELD): number | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'string') n = /^0x[0-9a-f]{1,16}$/i.test(v.trim()) ? Number.parseInt(v.trim(), 16) : Number(v);
  else throw new BadInputError(`${what} should be a number, not ${describe(v)}`, file);
  if (n < 0) throw new BadInputError(`${what} is negative (${describe(v)}): a size, a count or a time cannot be`, file);
  if (!Number.isFinite(n) || n > max) throw new BadInputError(`${what} is not a valid number: ${describe(v)}`, file);
  return n;
}

/** Like reqNumber, for a size, an address or a count: the number must be whole. */
export function reqWhole(v: unknown, what: string, file: string, max = Number.MAX_SAFE_INTEGER): number {
  const n = reqNumber(v, what, file, max);
  if (!Number.isInteger(n)) throw new BadInputError(`${what} is not a whole number: ${describe(v)}`, file);
  return n;
}

/** Like optNumber, but the value must be there. */
export function reqNumber(v: unknown, what: string, file: string, max = MAX_FIELD): number {
  const n = optNumber(v, what, file, max);
  if (n === undefined) throw new BadInputError(`${what} is missing`, file);
  return n;
}

/** A timestamp in nanoseconds as text or number, checked; digits-only strings keep full precision. */
export function reqTimestamp(v: unknown, what: string, file: string): string | number {
  if (typeof v === 'string' && /^\d{1,20}$/.test(v.trim())) return v.trim();
  return reqNumber(v, what, file);
}

/** A short printable description of a bad value. */
export function describe(v: unknown): string {
  const s =
    typeof v === 'string'
      ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)
      : Array.isArray(v)
        ? 'an array'
        : v === null
          ? 'null'
          : typeof v === 'object'
            ? 'an object'
            : String(v);
  return s;
}
