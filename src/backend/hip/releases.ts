/**
 * What each ROCm release accepts, decided in one place from HIP_VERSION (major * 10^7 + minor * 10^5 + patch, as
 * hipRuntimeGetVersion answers it) and, where a release's published header says more, from that header. Every
 * decision here is a pure function, tested against the releases named (src/backend/hip/releases.test.ts); the
 * sources are named beside each one and in docs/rocm.md.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BatchPolicy } from '../native/batch-call.js';

/** HIP_VERSION of a release: `hipVersion(7, 1)` = 70100000. */
export function hipVersion(major: number, minor: number, patch = 0): number {
  return major * 10_000_000 + minor * 100_000 + patch;
}

/** hipErrorNotSupported (hip_runtime_api.h): how ROCm 7.1 to 7.12 refuse copy attributes in hipMemcpyBatchAsync. */
export const HIP_ERROR_NOT_SUPPORTED = 801;

/**
 * The most copies one hipMemcpyBatchAsync call is given: the runtime faults (GPU memory access fault, then abort)
 * when count > 8192, whatever the sizes, direction or attributes (vllm-project/vllm pull request 43018, on a ROCm 7.15
 * staging image); the batch is split into calls of this many.
 */
export const HIP_BATCH_MAX_COPIES = 8192;

/**
 * How hipMemcpyBatchAsync is called on a release, or undefined where it does not exist (before ROCm 7.1).
 * ROCm 7.1 to 7.12 return hipErrorNotSupported whenever numAttrs > 0 and copy one by one inside (ROCm/clr issue 273;
 * AMD's own test of 7.1, hip-tests catch/unit/memory/hipMemcpyBatchAsync.cc, passes numAttrs = 0), and their headers
 * have no host location type (hipMemLocationTypeHost arrives in 7.12's hip/driver_types.h): zero attributes there.
 * ROCm 7.13 takes numAttrs > 0 (ROCm/clr issue 273, checked on a 7.13 build). Every release so far declares the
 * 9-argument form with failIdx; `headerFailIndex` (from the install's own header, see {@link batchHeaderHasFailIndex})
 * wins where it says otherwise, so that a release following CUDA 13 in dropping failIdx is bound with the 8-argument
 * form. A call refused with hipErrorNotSupported steps down to zero attributes, then to one copy call each.
 */
export function hipBatchPolicy(version: number, headerFailIndex?: boolean): BatchPolicy | undefined {
  if (version < hipVersion(7, 1)) return undefined;
  return {
    failIndex: headerFailIndex ?? true,
    attributes: version >= hipVersion(7, 13) ? 'per-run' : 'none',
    maxCopies: HIP_BATCH_MAX_COPIES,
    refused: HIP_ERROR_NOT_SUPPORTED,
  };
}

/**
 * Whether the install's hip_runtime_api.h declares hipMemcpyBatchAsync with a failIdx parameter: true or false from
 * the declaration, undefined where the header is not there (a runtime-only install) or does not declare it.
 */
export function batchHeaderHasFailIndex(installRoot: string | undefined): boolean | undefined {
  if (!installRoot) return undefined;
  let text: string;
  try {
    text = readFileSync(join(installRoot, 'include/hip/hip_runtime_api.h'), 'utf8');
  } catch {
    return undefined;
  }
  const decl = /hipError_t\s+hipMemcpyBatchAsync\s*\(([^;]*?)\)\s*;/s.exec(text);
  return decl ? /\bfailIdx\b/.test(decl[1]!) : undefined;
}

/**
 * hipMallocAsync on the null stream: ROCm 5.2 reads the stream's device before its null check and crashes
 * (hipamd src/hip_mempool.cpp, rocm-5.2.0: `reinterpret_cast<hip::Stream*>(stream)->GetDevice()` first); 5.3 checks
 * first. On 5.2 gpumem allocates on a stream of its own instead.
 */
export function mallocAsyncNeedsStream(version: number): boolean {
  return version < hipVersion(5, 3);
}

/**
 * Uncached device memory (hipExtMallocWithFlags with hipDeviceMallocUncached = 0x3): the flag first appears in ROCm
 * 5.5's hip_runtime_api.h, and the runtime accepts it from 5.6 (5.3 to 5.5 answer hipErrorInvalidValue).
 */
export function uncachedDeviceMemory(version: number): boolean {
  return version >= hipVersion(5, 6);
}

/**
 * hipMemAllocationProp took its CUDA-compatible layout in ROCm 6 (older layouts are not bound), and the virtual
 * memory API is a device's to have: hipDeviceAttributeVirtualMemoryManagementSupported (89 in the 5.3 to 7.x headers;
 * absent before 5.3) must say so for every device.
 */
export function virtualMemory(version: number, symbols: boolean, devicesSay: readonly (number | undefined)[]): boolean {
  return symbols && version >= hipVersion(6, 0) && devicesSay.length > 0 && devicesSay.every((v) => v === 1);
}

/** hipDeviceAttributeMemoryPoolsSupported (88 in every header from 5.2): the stream-ordered allocator, per device. */
export function memoryPools(symbols: boolean, devicesSay: readonly (number | undefined)[]): boolean {
  return symbols && devicesSay.length > 0 && devicesSay.every((v) => v === 1);
}

/** Device attributes read for the decisions above (hipDeviceAttribute_t, the same in the 5.3 to 7.x headers). */
export const HIP_ATTR_MEMORY_POOLS_SUPPORTED = 88;
export const HIP_ATTR_VIRTUAL_MEMORY_SUPPORTED = 89;

/**
 * ROCm SMI has carried a deprecation notice since ROCm 6.1 and names AMD SMI (libamd_smi) its successor: from 6.1 AMD
 * SMI is the first choice for memory, processes and partitions, ROCm SMI the fallback; before 6.1 ROCm SMI alone.
 */
export function managementOrder(version: number): Array<'amd-smi' | 'rocm-smi'> {
  return version >= hipVersion(6, 1) ? ['amd-smi', 'rocm-smi'] : ['rocm-smi'];
}
