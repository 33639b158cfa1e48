/** Reading numbers and names out of untrusted trace records, with errors that say where. */
import { BadInputError } from '../../errors.js';
import { Direction, MemKind } from '../model.js';

/** Largest value accepted for a size or a timestamp: beyond it a trace is corrupt, not big. */
export const MAX_FIELD = 2 ** 63;

/**
 * A finite, non-negative number from a JSON value or CSV cell (decimal or 0x hex); `undefined` for a missing or empty one.
 * @throws BadInputError when present but not such a number.
 */
export function optNumber(v: unknown, what: string, file: string): number | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'string') n = /^0x[0-9a-f]{1,16}$/i.test(v.trim()) ? Number.parseInt(v.trim(), 16) : Number(v);
  else throw new BadInputError(`${what} should be a number, not ${describe(v)}`, file);
  if (!Number.isFinite(n) || n < 0 || n > MAX_FIELD) throw new BadInputError(`${what} is not a valid number: ${describe(v)}`, file);
  return n;
}

/** Like optNumber, but the value must be there. */
export function reqNumber(v: unknown, what: string, file: string): number {
  const n = optNumber(v, what, file);
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
  const s = typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : Array.isArray(v) ? 'an array' : v === null ? 'null' : typeof v === 'object' ? 'an object' : String(v);
  return s;
}

/** A memory kind from a word a trace uses (Pageable, Pinned, Device, Managed, Host...). Host says nothing of pinning. */
export function memKindOf(word: string): number {
  switch (word.toLowerCase()) {
    case 'pageable':
      return MemKind.pageable;
    case 'pinned':
      return MemKind.pinned;
    case 'device':
    case 'peer':
      return MemKind.device;
    case 'managed':
      return MemKind.managed;
    case 'array':
      return MemKind.array;
    default:
      return MemKind.unknown;
  }
}

const HOSTISH = new Set<number>([MemKind.pageable, MemKind.pinned]);

/** The copy direction from the source and destination words (Host, Pageable, Pinned, Device, Managed...). */
export function directionOf(src: string, dst: string): number {
  const s = src.toLowerCase();
  const d = dst.toLowerCase();
  const host = (w: string): boolean => w === 'host' || HOSTISH.has(memKindOf(w));
  const dev = (w: string): boolean => w === 'device' || w === 'array' || w === 'managed';
  if (host(s) && dev(d)) return Direction.HtoD;
  if (dev(s) && host(d)) return Direction.DtoH;
  if (dev(s) && dev(d)) return Direction.DtoD;
  if (s === 'peer' || d === 'peer') return Direction.PtoP;
  if (host(s) && host(d)) return Direction.HtoH;
  return Direction.unknown;
}

/** A direction from a short code (HtoD, DtoH, DtoD, PtoP, HtoH, or rocprof's HOST_TO_DEVICE style). */
export function directionCode(code: string): number {
  const c = code.toUpperCase().replace(/^MEMORY_COPY_/, '').replace(/[^A-Z]/g, '');
  switch (c) {
    case 'HTOD':
    case 'HOSTTODEVICE':
      return Direction.HtoD;
    case 'DTOH':
    case 'DEVICETOHOST':
      return Direction.DtoH;
    case 'DTOD':
    case 'DEVICETODEVICE':
    case 'ATOD':
    case 'DTOA':
    case 'ATOA':
      return Direction.DtoD;
    case 'PTOP':
    case 'PEERTOPEER':
      return Direction.PtoP;
    case 'HTOH':
    case 'HOSTTOHOST':
      return Direction.HtoH;
    case 'HTOA':
      return Direction.HtoD;
    case 'ATOH':
      return Direction.DtoH;
    default:
      return Direction.unknown;
  }
}
