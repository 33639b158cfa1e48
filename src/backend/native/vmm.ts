/**
 * The virtual memory API (cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess and HIP's hipMem*
 * equivalents) as gpumem's VirtualMemoryApi: reserve address space, create physical memory, map it and give the
 * device access. Growable pool segments are built on it.
 */
import type { VirtualMemoryApi } from '../backend.js';
import { accessDesc, allocationProp, type NativeFn } from './ffi.js';

/** What the VMM functions need from their backend. */
export interface VmmHooks {
  /** The typed error for a failed status of `call`. */
  fail(status: number, call: string): unknown;
  guard(): void;
  /** Makes `device`'s context current before physical allocations. */
  prepareContext(device: number): void;
  /** Adds the device's free and total bytes to an out-of-memory error. */
  oom(e: unknown, device: number, bytes: number): unknown;
}

/** The VirtualMemoryApi over the functions keyed MemGetAllocationGranularity, MemCreate, ... */
export function nativeVmm(f: Record<string, NativeFn>, hooks: VmmHooks): VirtualMemoryApi {
  const out = [0];
  const check = (status: number, call: string): void => {
    if (status !== 0) throw hooks.fail(status, call);
  };
  return {
    granularity: (device) => {
      check(f.MemGetAllocationGranularity!(out, allocationProp(device), 0) as number, 'MemGetAllocationGranularity');
      return out[0]!;
    },
    reserve: (bytes, alignment) => {
      hooks.guard();
      check(f.MemAddressReserve!(out, bytes, alignment, 0, 0) as number, 'MemAddressReserve');
      return out[0]!;
    },
    free: (address, bytes) => check(f.MemAddressFree!(address, bytes) as number, 'MemAddressFree'),
    create: (device, bytes) => {
      hooks.guard();
      hooks.prepareContext(device);
      try {
        check(f.MemCreate!(out, bytes, allocationProp(device), 0) as number, `MemCreate(${bytes})`);
      } catch (e) {
        throw hooks.oom(e, device, bytes);
      }
      return out[0]!;
    },
    release: (handle) => check(f.MemRelease!(handle) as number, 'MemRelease'),
    map: (address, bytes, handle) => check(f.MemMap!(address, bytes, 0, handle, 0) as number, 'MemMap'),
    setAccess: (address, bytes, device) => check(f.MemSetAccess!(address, bytes, accessDesc(device), 1) as number, 'MemSetAccess'),
    unmap: (address, bytes) => check(f.MemUnmap!(address, bytes) as number, 'MemUnmap'),
  };
}
