/**
 * What a vendor hands the shared native backend: its functions, status table, capabilities, device attribute
 * numbers, compiler and module loader; and the capabilities both runtimes derive alike from their functions.
 */
import type { BackendCapabilities, BackendName, LibraryRecord, MemAdvice } from '../backend.js';
import type { BatchPolicy } from './batch-call.js';
import type { NativeFn } from './ffi.js';
import type { RtcCompiler } from './rtc.js';
import { RUNTIME_FLAGS, type StatusTable } from './runtime-api.js';

/** Parts of a native backend that the vendor supplies at construction. */
export interface NativeParts {
  name: Exclude<BackendName, 'host'>;
  /** Runtime functions by their name without prefix: Malloc, StreamCreateWithPriority, ... */
  fns: Record<string, NativeFn>;
  status: StatusTable;
  capabilities: BackendCapabilities;
  runtimeVersion: string | undefined;
  driverVersion: string | undefined;
  libraries: LibraryRecord[];
  /**
   * Module loading and launches: functions keyed ModuleLoadData, ModuleUnload, ModuleGetFunction and `launch`
   * (cuLaunchKernel / hipModuleLaunchKernel). `statusName` names their status codes when they are not the runtime's.
   */
  modules?: { fns: Record<string, NativeFn>; launch: string; statusName?: (status: number) => string } | undefined;
  /** The run-time compiler, when one was found. */
  rtc?: RtcCompiler | undefined;
  /**
   * Virtual memory functions keyed MemGetAllocationGranularity, MemCreate, MemRelease, MemAddressReserve,
   * MemAddressFree, MemMap, MemUnmap, MemSetAccess; set only where the structs' layout is known for this version.
   */
  vmm?: { fns: Record<string, NativeFn>; statusName?: (status: number) => string } | undefined;
  /** The numbers of the device attributes `deviceInfo` reads (cudaDeviceAttr / hipDeviceAttribute_t). */
  deviceAttributes: DeviceAttributeIds;
  /** How the bound MemcpyBatchAsync is called, where it is bound. */
  batch?: BatchPolicy | undefined;
  /** The runtime's pinned allocator, which the host copier's threads bind to pin the staging ring. */
  pinnedAllocator: 'cudaHostAlloc' | 'hipHostMalloc';
}

/** What each vendor decides itself: kernels (which compiler and loader it has) and the AMD-only memory kinds. */
export type VendorCapabilities = Pick<
  BackendCapabilities,
  'kernels' | 'fineGrainedDeviceMemory' | 'uncachedDeviceMemory' | 'coherentHostMemory' | 'numaHostMemory' | 'coherencyControl' | 'gpuDirectStorage'
>;

/** A runtime's capabilities: what both vendors' runtimes derive alike from their functions, plus the vendor's own. */
export function nativeCapabilities(rt: Record<string, NativeFn>, virtualMemory: boolean, vendor: VendorCapabilities): BackendCapabilities {
  const { kernels, ...memoryKinds } = vendor;
  return {
    managedMemory: !!rt.MallocManaged && !!rt.MemPrefetchAsync,
    mappedMemory: true,
    hostRegister: true,
    writeCombined: true,
    streamOrderedAllocator: !!rt.MallocAsync,
    virtualMemory,
    peerAccess: true,
    kernels,
    blockingHostCallbacks: !!rt.LaunchHostFunc,
    ...memoryKinds,
    batchCopies: !!rt.MemcpyBatchAsync,
    graphs: !!rt.StreamBeginCapture && !!rt.StreamEndCapture && !!rt.GraphInstantiateWithFlags && !!rt.GraphLaunch && !!rt.LaunchHostFunc,
    hostCopierThreads: true,
    gpuMemory: true,
    vendorCollectives: true,
  };
}

/** Device attribute numbers, by what they tell; each vendor's header numbers them differently. */
export interface DeviceAttributeIds {
  ccMajor: number;
  ccMinor: number;
  multiprocessorCount: number;
  l2CacheSize: number;
  asyncEngineCount: number;
  managedMemory: number;
  concurrentManagedAccess: number;
  pageableMemoryAccess: number;
  integrated: number;
  canMapHostMemory: number;
  memoryBusWidth: number;
  memoryClockRate: number;
}

export const ADVICE: Record<MemAdvice, number> = {
  'read-mostly': RUNTIME_FLAGS.adviseSetReadMostly,
  'unset-read-mostly': RUNTIME_FLAGS.adviseUnsetReadMostly,
  'preferred-location': RUNTIME_FLAGS.adviseSetPreferredLocation,
  'unset-preferred-location': RUNTIME_FLAGS.adviseUnsetPreferredLocation,
  'accessed-by': RUNTIME_FLAGS.adviseSetAccessedBy,
  'unset-accessed-by': RUNTIME_FLAGS.adviseUnsetAccessedBy,
  // hipMemoryAdvise (hip_runtime_api.h, 5.2 to 7.x); refused before any call where !capabilities.coherencyControl
  'coarse-grain': 100,
  'unset-coarse-grain': 101,
};
