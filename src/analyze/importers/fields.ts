/** Memory kinds and copy directions from the words and codes traces use for them. */
import { Direction, MemKind } from '../model.js';

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
  const c = code
    .toUpperCase()
    .replace(/^MEMORY_COPY_/, '')
    .replace(/[^A-Z]/g, '');
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
