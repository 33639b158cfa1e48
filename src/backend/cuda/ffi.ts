/**
 * CUDA bindings: libcudart (13, then 12) for the runtime, libcuda for modules, launches and the virtual memory
 * API, libnvrtc for run-time compilation. The structs they take are declared in ../native/ffi.ts.
 */
import type { LibraryRecord } from '../backend.js';
import { cudaLibraryDirs } from '../library-search.js';
import { declare, loadLibrary, tryLoadLibrary, vmmLayoutOk, type NativeFn } from '../native/ffi.js';
import { BATCH_PROTOTYPE, BATCH_PROTOTYPE_WITH_FAIL_INDEX, RTC_PROTOTYPES, RUNTIME_PROTOTYPES } from '../native/runtime-api.js';

/** Runtime prototypes whose signature changed in CUDA 13 (a location struct instead of a device id). */
const CUDA13_PROTOTYPES = [
  'int cudaMemPrefetchAsync(uintptr_t p, size_t n, GpumemMemLocation loc, unsigned int flags, uintptr_t s)',
  'int cudaMemAdvise(uintptr_t p, size_t n, int advice, GpumemMemLocation loc)',
];
const CUDA12_PROTOTYPES = [
  'int cudaMemPrefetchAsync(uintptr_t p, size_t n, int device, uintptr_t s)',
  'int cudaMemAdvise(uintptr_t p, size_t n, int advice, int device)',
];
const CUDA_ONLY_PROTOTYPES = ['int cudaHostAlloc(_Out_ uintptr_t *p, size_t n, unsigned int flags)', 'int cudaFreeHost(uintptr_t p)'];

const DRIVER_PROTOTYPES = [
  'int cuInit(unsigned int flags)',
  'int cuDriverGetVersion(_Out_ int *v)',
  'int cuDeviceGet(_Out_ int *dev, int ordinal)',
  'int cuDeviceGetName(void *name, int len, int dev)',
  'int cuGetErrorName(int status, _Out_ const char **name)',
  'int cuModuleLoadData(_Out_ uintptr_t *module, const void *image)',
  'int cuModuleUnload(uintptr_t module)',
  'int cuModuleGetFunction(_Out_ uintptr_t *fn, uintptr_t module, const char *name)',
  'int cuLaunchKernel(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, void *params, void **extra)',
  'int cuMemGetAllocationGranularity(_Out_ size_t *granularity, const GpumemMemAllocationProp *prop, int option)',
  'int cuMemCreate(_Out_ uintptr_t *handle, size_t size, const GpumemMemAllocationProp *prop, unsigned long long flags)',
  'int cuMemRelease(uintptr_t handle)',
  'int cuMemAddressReserve(_Out_ uintptr_t *ptr, size_t size, size_t alignment, uintptr_t addr, unsigned long long flags)',
  'int cuMemAddressFree(uintptr_t ptr, size_t size)',
  'int cuMemMap(uintptr_t ptr, size_t size, size_t offset, uintptr_t handle, unsigned long long flags)',
  'int cuMemUnmap(uintptr_t ptr, size_t size)',
  'int cuMemSetAccess(uintptr_t ptr, size_t size, const GpumemMemAccessDesc *desc, size_t count)',
];

/**
 * NVML, for a monitor: memory and processes per device without creating a context on it. Structs are passed as
 * byte buffers and read at the offsets nvml.h gives (nvmlMemory_t: total, free, used as u64; nvmlMemory_v2_t below; nvmlProcessInfo_t v2/v3:
 * pid u32, 4 bytes padding, usedGpuMemory u64, gpuInstanceId u32, computeInstanceId u32 = 24 bytes).
 */
const NVML_PROTOTYPES = [
  'int nvmlInit_v2()',
  'int nvmlShutdown()',
  'const char *nvmlErrorString(int result)',
  'int nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, _Out_ uintptr_t *device)',
  'int nvmlDeviceGetMemoryInfo(uintptr_t device, void *memory)',
  'int nvmlDeviceGetMemoryInfo_v2(uintptr_t device, void *memory)',
  'int nvmlDeviceGetComputeRunningProcesses_v3(uintptr_t device, _Inout_ unsigned int *count, void *infos)',
  'int nvmlDeviceGetGraphicsRunningProcesses_v3(uintptr_t device, _Inout_ unsigned int *count, void *infos)',
  // nvml.h: the UUID as a NUL-terminated string (NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96); nvmlUtilization_t is
  // { unsigned int gpu, memory } in percent; PCIe throughput counter 0 = TX, 1 = RX, in KB/s over a 20 ms sample.
  'int nvmlDeviceGetUUID(uintptr_t device, void *uuid, unsigned int length)',
  'int nvmlDeviceGetUtilizationRates(uintptr_t device, void *utilization)',
  'int nvmlDeviceGetPcieThroughput(uintptr_t device, int counter, _Out_ unsigned int *value)',
  // nvml.h: nvmlGpuP2PCapsIndex_t (NVLINK = 2) with nvmlGpuP2PStatus_t (OK = 0); nvmlGpuTopologyLevel_t.
  'int nvmlDeviceGetP2PStatus(uintptr_t device1, uintptr_t device2, int p2pIndex, _Out_ int *status)',
  'int nvmlDeviceGetTopologyCommonAncestor(uintptr_t device1, uintptr_t device2, _Out_ int *level)',
];
export const NVML_PROCESS_INFO_BYTES = 24;
export const NVML_MEMORY_BYTES = 24;
/** nvmlMemory_v2_t: version u32, 4 bytes padding, total, reserved, free, used as u64 = 40 bytes; its version word. */
export const NVML_MEMORY_V2_BYTES = 40;
export const NVML_MEMORY_V2_VERSION = NVML_MEMORY_V2_BYTES | (2 << 24);
/** nvmlReturn_t values read here. */
export const NVML_SUCCESS = 0;
export const NVML_ERROR_INSUFFICIENT_SIZE = 7;
/** NVML_DEVICE_UUID_V2_BUFFER_SIZE; nvmlPcieUtilCounter_t. */
export const NVML_UUID_BYTES = 96;
export const NVML_PCIE_UTIL_TX_BYTES = 0;
export const NVML_PCIE_UTIL_RX_BYTES = 1;
export const NVML_P2P_CAPS_INDEX_NVLINK = 2;
export const NVML_P2P_STATUS_OK = 0;
/** nvmlGpuTopologyLevel_t, as nvidia-smi topo names them. */
export const NVML_TOPOLOGY_LEVELS: Record<number, string> = {
  0: 'same board',
  10: 'one PCIe switch (PIX)',
  20: 'several PCIe switches (PXB)',
  30: 'one PCIe host bridge (PHB)',
  40: 'one NUMA node (NODE)',
  50: 'across NUMA nodes (SYS)',
};

/** Everything the CUDA backend binds. */
export interface CudaBindings {
  rt: Record<string, NativeFn>;
  driver: Record<string, NativeFn> | undefined;
  nvrtc: Record<string, NativeFn> | undefined;
  /** NVML (libnvidia-ml), where present; initialised on first use. */
  nvml: Record<string, NativeFn> | undefined;
  runtimeVersion: number;
  /** True when prefetch and advise take a location struct (CUDA 13 and later). */
  locationStruct: boolean;
  /** True when the VMM structs laid out as the header says. */
  vmmLayoutOk: boolean;
  /** True when the bound MemcpyBatchAsync takes a failIdx out-parameter (CUDA 12.8 to 12.9). */
  batchFailIndex: boolean;
  libraries: LibraryRecord[];
}

/**
 * Loads libcudart and, where present, libcuda and libnvrtc.
 * @throws BackendUnavailableError when libcudart cannot be loaded.
 */
export function loadCuda(): CudaBindings {
  const cudart = loadLibrary(
    { envVar: 'GPUMEM_LIBCUDART', names: ['libcudart.so.13', 'libcudart.so.12', 'libcudart.so'], dirs: cudaLibraryDirs('cudart') },
    'runtime',
    'cuda',
  );
  const rt = declare(cudart.lib, RUNTIME_PROTOTYPES, 'cuda');
  const v = [0];
  rt.RuntimeGetVersion!(v);
  const runtimeVersion = v[0]!;
  const locationStruct = runtimeVersion >= 13000;
  Object.assign(rt, declare(cudart.lib, [...CUDA_ONLY_PROTOTYPES, ...(locationStruct ? CUDA13_PROTOTYPES : CUDA12_PROTOTYPES)], 'cuda'));
  // cudaMemcpyBatchAsync: from 12.8 with a failIdx out-parameter, from 13.0 without.
  const batch = runtimeVersion >= 13000 ? BATCH_PROTOTYPE : runtimeVersion >= 12080 ? BATCH_PROTOTYPE_WITH_FAIL_INDEX : undefined;
  if (batch) Object.assign(rt, declare(cudart.lib, [batch], 'cuda'));
  const batchFailIndex = runtimeVersion < 13000;

  const driverLib = tryLoadLibrary({ envVar: 'GPUMEM_LIBCUDA', names: ['libcuda.so.1', 'libcuda.so'], dirs: cudaLibraryDirs('driver') }, 'driver', 'cuda');
  const driver = driverLib.loaded ? declare(driverLib.loaded.lib, DRIVER_PROTOTYPES, 'cu') : undefined;
  const major = Math.floor(runtimeVersion / 1000);
  const nvrtcNames = [`libnvrtc.so.${major}`, 'libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so'].filter((n, i, a) => a.indexOf(n) === i);
  const nvrtcLib = tryLoadLibrary({ envVar: 'GPUMEM_LIBNVRTC', names: nvrtcNames, dirs: cudaLibraryDirs('nvrtc') }, 'compiler', 'cuda');
  const nvrtc = nvrtcLib.loaded
    ? declare(
        nvrtcLib.loaded.lib,
        [...RTC_PROTOTYPES, 'int {P}GetCUBINSize(uintptr_t prog, _Out_ size_t *size)', 'int {P}GetCUBIN(uintptr_t prog, void *buf)'],
        'nvrtc',
      )
    : undefined;
  const nvmlLib = tryLoadLibrary(
    { envVar: 'GPUMEM_LIBNVML', names: ['libnvidia-ml.so.1', 'libnvidia-ml.so'], dirs: cudaLibraryDirs('nvml') },
    'management',
    'cuda',
  );
  const nvml = nvmlLib.loaded ? declare(nvmlLib.loaded.lib, NVML_PROTOTYPES) : undefined;
  return {
    rt,
    driver,
    nvrtc,
    nvml,
    runtimeVersion,
    locationStruct,
    vmmLayoutOk: vmmLayoutOk(),
    batchFailIndex,
    libraries: [cudart.record, driverLib.record, nvrtcLib.record, nvmlLib.record],
  };
}
