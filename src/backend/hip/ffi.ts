/**
 * HIP bindings: libamdhip64 (7, 6, then 5) for the runtime, modules, launches and virtual memory; libhiprtc for
 * kernels (ROCm 5 ships hiprtc inside libamdhip64). Signatures follow hip_runtime_api.h; HIP keeps the device-id
 * form of hipMemPrefetchAsync and hipMemAdvise in every version.
 */
import type { LibraryRecord } from '../backend.js';
import { installRootOf, rocmLibraryDirs } from '../library-search.js';
import type { BatchPolicy } from '../native/batch-call.js';
import { batchHeaderHasFailIndex, hipBatchPolicy, managementOrder } from './releases.js';
import { declare, loadLibrary, tryLoadLibrary, vmmLayoutOk, type NativeFn } from '../native/ffi.js';
import { BATCH_PROTOTYPE, BATCH_PROTOTYPE_WITH_FAIL_INDEX, RTC_PROTOTYPES, RUNTIME_PROTOTYPES } from '../native/runtime-api.js';

const HIP_ONLY_PROTOTYPES = [
  'int hipHostMalloc(_Out_ uintptr_t *p, size_t n, unsigned int flags)',
  'int hipHostFree(uintptr_t p)',
  'int hipExtMallocWithFlags(_Out_ uintptr_t *p, size_t n, unsigned int flags)',
  'int hipMemPrefetchAsync(uintptr_t p, size_t n, int device, uintptr_t s)',
  'int hipMemAdvise(uintptr_t p, size_t n, int advice, int device)',
  'int hipMemRangeGetAttribute(void *data, size_t dataSize, int attribute, uintptr_t p, size_t n)',
  'int hipDeviceGetName(void *name, int len, int device)',
  // ROCm >= 6 exports the current layout as hipGetDevicePropertiesR0600; plain hipGetDeviceProperties is the
  // legacy (R0000) layout in every version.
  'int hipGetDevicePropertiesR0600(void *props, int device)',
  'int hipGetDeviceProperties(void *props, int device)',
  'int hipModuleLoadData(_Out_ uintptr_t *module, const void *image)',
  'int hipModuleUnload(uintptr_t module)',
  'int hipModuleGetFunction(_Out_ uintptr_t *fn, uintptr_t module, const char *name)',
  'int hipModuleLaunchKernel(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, void *params, void **extra)',
  'int hipMemGetAllocationGranularity(_Out_ size_t *granularity, const GpumemMemAllocationProp *prop, int option)',
  'int hipMemCreate(_Out_ uintptr_t *handle, size_t size, const GpumemMemAllocationProp *prop, unsigned long long flags)',
  'int hipMemRelease(uintptr_t handle)',
  'int hipMemAddressReserve(_Out_ uintptr_t *ptr, size_t size, size_t alignment, uintptr_t addr, unsigned long long flags)',
  'int hipMemAddressFree(uintptr_t ptr, size_t size)',
  'int hipMemMap(uintptr_t ptr, size_t size, size_t offset, uintptr_t handle, unsigned long long flags)',
  'int hipMemUnmap(uintptr_t ptr, size_t size)',
  'int hipMemSetAccess(uintptr_t ptr, size_t size, const GpumemMemAccessDesc *desc, size_t count)',
];

const HIPRTC_CODE_PROTOTYPES = ['int {P}GetCodeSize(uintptr_t prog, _Out_ size_t *size)', 'int {P}GetCode(uintptr_t prog, void *buf)'];

/**
 * ROCm SMI (librocm_smi64), for a monitor: memory and the processes using each device, without a HIP context.
 * rsmi_process_info_t is read from a byte buffer at rocm_smi.h's offsets: process_id u32, pasid u32, vram_usage u64,
 * sdma_usage u64, cu_occupancy u32, 4 bytes padding = 32 bytes. vram_usage is per process over all its devices.
 */
const RSMI_PROTOTYPES = [
  'int rsmi_init(uint64_t flags)',
  'int rsmi_shut_down()',
  'int rsmi_status_string(int status, _Out_ const char **text)',
  'int rsmi_num_monitor_devices(_Out_ uint32_t *count)',
  'int rsmi_dev_pci_id_get(uint32_t device, _Out_ uint64_t *bdfid)',
  'int rsmi_dev_memory_total_get(uint32_t device, int memType, _Out_ uint64_t *total)',
  'int rsmi_dev_memory_usage_get(uint32_t device, int memType, _Out_ uint64_t *used)',
  'int rsmi_compute_process_info_get(void *procs, _Inout_ uint32_t *count)',
  'int rsmi_compute_process_gpus_get(uint32_t pid, void *devices, _Inout_ uint32_t *count)',
  // ROCm >= 6.0: a process's VRAM on one device (rsmi_process_info_t, as above).
  'int rsmi_compute_process_info_by_device_get(uint32_t pid, uint32_t device, void *proc)',
  // ROCm >= 6.1: the partition of a device (MI300 CPX/DPX modes); 0 on an unpartitioned GPU.
  'int rsmi_dev_partition_id_get(uint32_t device, _Out_ uint32_t *partition)',
  // rocm_smi.h: the device's unique id (what rocm-smi prints as "Unique ID"), and the percent of time it was busy.
  // rsmi_dev_pci_throughput_get is not bound: the kernel counts packets for a whole second inside the call.
  'int rsmi_dev_unique_id_get(uint32_t device, _Out_ uint64_t *id)',
  // rocm_smi.h: RSMI_IO_LINK_TYPE (PCIEXPRESS = 1, XGMI = 2) and the hop count between two devices.
  'int rsmi_topo_get_link_type(uint32_t src, uint32_t dst, _Out_ uint64_t *hops, _Out_ int *type)',
  'int rsmi_dev_busy_percent_get(uint32_t device, _Out_ uint32_t *percent)',
  'int rsmi_topo_get_numa_node_number(uint32_t device, _Out_ uint32_t *node)',
];

/**
 * AMD SMI (libamd_smi, ROCm 6.1 and later), from amdsmi.h (ROCm/amdsmi, rocm-6.1.0 and rocm-6.2.0): processor and
 * socket handles are pointers, passed as numbers; structs are byte buffers read at the header's offsets (amd-smi.ts).
 * amdsmi_get_gpu_enumeration_info (6.4) and amdsmi_get_gpu_kfd_info are bound where the library has them.
 */
const AMDSMI_PROTOTYPES = [
  'int amdsmi_init(uint64_t flags)',
  'int amdsmi_shut_down()',
  'int amdsmi_status_code_to_string(int status, _Out_ const char **text)',
  'int amdsmi_get_socket_handles(_Inout_ uint32_t *count, void *sockets)',
  'int amdsmi_get_processor_handles(uintptr_t socket, _Inout_ uint32_t *count, void *handles)',
  'int amdsmi_get_gpu_memory_total(uintptr_t processor, int type, _Out_ uint64_t *total)',
  'int amdsmi_get_gpu_memory_usage(uintptr_t processor, int type, _Out_ uint64_t *used)',
  'int amdsmi_get_gpu_device_bdf(uintptr_t processor, _Out_ uint64_t *bdf)',
  'int amdsmi_get_gpu_enumeration_info(uintptr_t processor, void *info)',
  'int amdsmi_get_gpu_kfd_info(uintptr_t processor, void *info)',
  'int amdsmi_topo_get_numa_node_number(uintptr_t processor, _Out_ uint32_t *node)',
  'int amdsmi_topo_get_link_type(uintptr_t a, uintptr_t b, _Out_ uint64_t *hops, _Out_ int *type)',
  'int amdsmi_get_gpu_device_uuid(uintptr_t processor, _Inout_ unsigned int *length, void *uuid)',
  'int amdsmi_get_gpu_activity(uintptr_t processor, void *usage)',
];
export const RSMI_PROCESS_INFO_BYTES = 32;
/** rsmi_status_t and rsmi_memory_type_t values read here (rocm_smi.h). */
export const RSMI_STATUS_SUCCESS = 0;
export const RSMI_STATUS_INSUFFICIENT_SIZE = 11;
export const RSMI_MEM_TYPE_VRAM = 0;
export const RSMI_IOLINK_TYPE_PCIEXPRESS = 1;
export const RSMI_IOLINK_TYPE_XGMI = 2;

/** Everything the HIP backend binds. */
export interface HipBindings {
  rt: Record<string, NativeFn>;
  rtc: Record<string, NativeFn> | undefined;
  /** hipRuntimeGetVersion's answer (HIP_VERSION: major * 10^7 + minor * 10^5 + patch). */
  runtimeVersion: number;
  vmmLayoutOk: boolean;
  /** How hipMemcpyBatchAsync is called (ROCm 7.1 and later). */
  batch: BatchPolicy | undefined;
  /** ROCm SMI, where present; initialised on first use. */
  rsmi: Record<string, NativeFn> | undefined;
  /** AMD SMI, where present (ROCm 6.1 and later); initialised on first use. */
  amdsmi: Record<string, NativeFn> | undefined;
  libraries: LibraryRecord[];
  /** The ROCm install libamdhip64 came from (hipRTC and ROCm SMI are looked for there first). */
  install: string | undefined;
}

/**
 * Loads libamdhip64 and libhiprtc.
 * @throws BackendUnavailableError when libamdhip64 cannot be loaded.
 */
export function loadHip(): HipBindings {
  const amdhip = loadLibrary(
    {
      envVar: 'GPUMEM_LIBAMDHIP64',
      names: ['libamdhip64.so.7', 'libamdhip64.so.6', 'libamdhip64.so.5', 'libamdhip64.so'],
      dirs: rocmLibraryDirs(),
      order: 'dirs-first',
    },
    'runtime',
    'hip',
  );
  const rt = declare(amdhip.lib, [...RUNTIME_PROTOTYPES, ...HIP_ONLY_PROTOTYPES], 'hip');
  const v = [0];
  rt.RuntimeGetVersion?.(v);
  const install = installRootOf(amdhip.record.path);
  // hipMemcpyBatchAsync (ROCm 7.1): the form the install's header declares, else the 9-argument form with failIdx.
  const batch = hipBatchPolicy(v[0] ?? 0, batchHeaderHasFailIndex(install));
  if (batch) Object.assign(rt, declare(amdhip.lib, [batch.failIndex ? BATCH_PROTOTYPE_WITH_FAIL_INDEX : BATCH_PROTOTYPE], 'hip'));
  // hipRTC and ROCm SMI from the same install as libamdhip64 before any other.
  const installLib = amdhip.record.path?.startsWith('/') ? amdhip.record.path.slice(0, amdhip.record.path.lastIndexOf('/')) : undefined;
  const dirs = [...(installLib ? [installLib] : []), ...rocmLibraryDirs()];
  const major = Math.floor((v[0] ?? 0) / 10_000_000);
  const rtcLib = tryLoadLibrary(
    { envVar: 'GPUMEM_LIBHIPRTC', names: ['libhiprtc.so.7', 'libhiprtc.so.6', 'libhiprtc.so.5', 'libhiprtc.so'], dirs, order: 'dirs-first' },
    'compiler',
    'hip',
  );
  const rtcPrototypes = [...RTC_PROTOTYPES, ...HIPRTC_CODE_PROTOTYPES];
  let rtc = rtcLib.loaded ? declare(rtcLib.loaded.lib, rtcPrototypes, 'hiprtc') : undefined;
  const libraries = [amdhip.record, rtcLib.record];
  if (!rtc?.CompileProgram && major < 7) {
    // ROCm 5 and 6 also export hipRTC from libamdhip64 itself; ROCm 7 took it out ("Starting with the 7.0 release
    // hipRTC is no longer included in the HIP runtime").
    const inRuntime = declare(amdhip.lib, rtcPrototypes, 'hiprtc');
    if (inRuntime.CompileProgram) {
      rtc = inRuntime;
      libraries[1] = { role: 'compiler', name: `${amdhip.record.name} (hiprtc)`, path: amdhip.record.path, envVar: 'GPUMEM_LIBHIPRTC', loaded: true };
    }
  }
  if (!rtc?.CompileProgram) libraries[1] = { ...libraries[1]!, loaded: false, error: hiprtcMissing(major, installLib) };
  const rsmiLib = tryLoadLibrary(
    {
      envVar: 'GPUMEM_LIBROCM_SMI',
      names: ['librocm_smi64.so.7', 'librocm_smi64.so.6', 'librocm_smi64.so.5', 'librocm_smi64.so.1', 'librocm_smi64.so'],
      dirs,
      order: 'dirs-first',
    },
    'management',
    'hip',
  );
  const rsmi = rsmiLib.loaded ? declare(rsmiLib.loaded.lib, RSMI_PROTOTYPES) : undefined;
  // AMD SMI where the release has it (6.1 and later), before ROCm SMI in the list, as it is asked first.
  let amdsmi: Record<string, NativeFn> | undefined;
  if (managementOrder(v[0] ?? 0).includes('amd-smi')) {
    const amdsmiLib = tryLoadLibrary(
      { envVar: 'GPUMEM_LIBAMD_SMI', names: ['libamd_smi.so.26', 'libamd_smi.so.25', 'libamd_smi.so.24', 'libamd_smi.so'], dirs, order: 'dirs-first' },
      'management',
      'hip',
    );
    libraries.push(amdsmiLib.record);
    amdsmi = amdsmiLib.loaded ? declare(amdsmiLib.loaded.lib, AMDSMI_PROTOTYPES) : undefined;
  }
  libraries.push(rsmiLib.record);
  return { rt, rtc, runtimeVersion: v[0]!, vmmLayoutOk: vmmLayoutOk(), batch, rsmi, amdsmi, libraries, install };
}

/** Why kernels are unavailable on HIP: which library is missing, for the ROCm version loaded. */
export function hiprtcMissing(major: number, installLib: string | undefined): string {
  const where = installLib ? ` in ${installLib} or on the loader's path` : " on the loader's path";
  return major >= 7
    ? `libhiprtc.so.7 not found${where}: ROCm 7 ships hipRTC as its own library (install ROCm's hiprtc package, or set GPUMEM_LIBHIPRTC); without it no kernel can be compiled`
    : `hipRTC not found: neither libhiprtc${where} nor hipRTC inside libamdhip64 (set GPUMEM_LIBHIPRTC); without it no kernel can be compiled`;
}
