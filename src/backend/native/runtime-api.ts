/**
 * The C prototypes that CUDA's runtime and HIP share, written once with `{P}` standing for the prefix
 * (cuda, hip). Pointers and handles are declared `uintptr_t` so that they cross as plain numbers.
 * Where the two runtimes differ (names, or signatures such as prefetch in CUDA 13) the vendor's ffi.ts
 * declares its own.
 */

export const RUNTIME_PROTOTYPES: readonly string[] = [
  'int {P}GetDeviceCount(_Out_ int *count)',
  'int {P}RuntimeGetVersion(_Out_ int *v)',
  'int {P}DriverGetVersion(_Out_ int *v)',
  'const char *{P}GetErrorName(int e)',
  'const char *{P}GetErrorString(int e)',
  'int {P}GetLastError()',
  'int {P}SetDevice(int d)',
  'int {P}DeviceGetAttribute(_Out_ int *v, int attr, int d)',
  'int {P}DeviceGetPCIBusId(void *buf, int len, int d)',
  'int {P}MemGetInfo(_Out_ size_t *free, _Out_ size_t *total)',
  'int {P}DeviceSynchronize()',
  'int {P}Malloc(_Out_ uintptr_t *p, size_t n)',
  'int {P}Free(uintptr_t p)',
  'int {P}HostGetDevicePointer(_Out_ uintptr_t *p, uintptr_t host, unsigned int flags)',
  'int {P}MallocManaged(_Out_ uintptr_t *p, size_t n, unsigned int flags)',
  'int {P}HostRegister(uintptr_t p, size_t n, unsigned int flags)',
  'int {P}HostUnregister(uintptr_t p)',
  'int {P}Memcpy(uintptr_t dst, uintptr_t src, size_t n, int kind)',
  'int {P}MemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t stream)',
  'int {P}MemcpyPeerAsync(uintptr_t dst, int dstDevice, uintptr_t src, int srcDevice, size_t n, uintptr_t stream)',
  'int {P}MemsetAsync(uintptr_t p, int v, size_t n, uintptr_t stream)',
  'int {P}MallocAsync(_Out_ uintptr_t *p, size_t n, uintptr_t stream)',
  'int {P}FreeAsync(uintptr_t p, uintptr_t stream)',
  'int {P}DeviceGetDefaultMemPool(_Out_ uintptr_t *pool, int d)',
  'int {P}MemPoolSetAttribute(uintptr_t pool, int attr, void *value)',
  'int {P}MemPoolTrimTo(uintptr_t pool, size_t keep)',
  'int {P}StreamCreateWithPriority(_Out_ uintptr_t *s, unsigned int flags, int priority)',
  'int {P}DeviceGetStreamPriorityRange(_Out_ int *least, _Out_ int *greatest)',
  'int {P}StreamDestroy(uintptr_t s)',
  'int {P}StreamSynchronize(uintptr_t s)',
  'int {P}StreamQuery(uintptr_t s)',
  'int {P}StreamWaitEvent(uintptr_t s, uintptr_t e, unsigned int flags)',
  'int {P}LaunchHostFunc(uintptr_t s, void *fn, void *user)',
  'int {P}EventCreateWithFlags(_Out_ uintptr_t *e, unsigned int flags)',
  'int {P}EventDestroy(uintptr_t e)',
  'int {P}EventRecord(uintptr_t e, uintptr_t s)',
  'int {P}EventSynchronize(uintptr_t e)',
  'int {P}EventQuery(uintptr_t e)',
  'int {P}EventElapsedTime(_Out_ float *ms, uintptr_t a, uintptr_t b)',
  'int {P}DeviceCanAccessPeer(_Out_ int *can, int d, int peer)',
  'int {P}DeviceEnablePeerAccess(int peer, unsigned int flags)',
  'int {P}DeviceDisablePeerAccess(int peer)',
  'int {P}StreamBeginCapture(uintptr_t s, int mode)',
  'int {P}StreamEndCapture(uintptr_t s, _Out_ uintptr_t *graph)',
  'int {P}GraphInstantiateWithFlags(_Out_ uintptr_t *exec, uintptr_t graph, unsigned long long flags)',
  'int {P}GraphLaunch(uintptr_t exec, uintptr_t s)',
  'int {P}GraphExecDestroy(uintptr_t exec)',
  'int {P}GraphDestroy(uintptr_t graph)',
];

/**
 * The batched copy (cudaMemcpyBatchAsync, hipMemcpyBatchAsync): CUDA 12.8 and HIP (ROCm 7.1) take a failIdx
 * out-parameter before the stream; CUDA 13 dropped it. Arrays are passed as typed arrays (pointers, sizes and
 * attribute indices as 64-bit values written in 32-bit halves).
 */
export const BATCH_PROTOTYPE_WITH_FAIL_INDEX =
  'int {P}MemcpyBatchAsync(const void *dsts, const void *srcs, const void *sizes, size_t count, const void *attrs, const void *attrsIdxs, size_t numAttrs, _Out_ size_t *failIdx, uintptr_t s)';
export const BATCH_PROTOTYPE =
  'int {P}MemcpyBatchAsync(const void *dsts, const void *srcs, const void *sizes, size_t count, const void *attrs, const void *attrsIdxs, size_t numAttrs, uintptr_t s)';

/**
 * The run-time compiler's prototypes (nvrtc, hiprtc), `{P}` standing for the prefix. The call that returns the
 * binary differs (nvrtcGetCUBIN, hiprtcGetCode) and is declared by the vendor.
 */
export const RTC_PROTOTYPES: readonly string[] = [
  'int {P}Version(_Out_ int *major, _Out_ int *minor)',
  'const char *{P}GetErrorString(int r)',
  'int {P}CreateProgram(_Out_ uintptr_t *prog, const char *src, const char *name, int numHeaders, void *headers, void *includeNames)',
  'int {P}CompileProgram(uintptr_t prog, int numOptions, const char **options)',
  'int {P}GetProgramLogSize(uintptr_t prog, _Out_ size_t *size)',
  'int {P}GetProgramLog(uintptr_t prog, void *log)',
  'int {P}DestroyProgram(_Inout_ uintptr_t *prog)',
];

/** Flag values shared by CUDA and HIP (checked against both headers). */
export const RUNTIME_FLAGS = {
  streamNonBlocking: 0x1,
  eventBlockingSync: 0x1,
  eventDisableTiming: 0x2,
  memAttachGlobal: 0x1,
  memAttachHost: 0x2,
  hostAllocPortable: 0x1,
  hostAllocMapped: 0x2,
  hostAllocWriteCombined: 0x4,
  hostRegisterPortable: 0x1,
  hostRegisterMapped: 0x2,
  memPoolAttrReleaseThreshold: 4,
  adviseSetReadMostly: 1,
  adviseUnsetReadMostly: 2,
  adviseSetPreferredLocation: 3,
  adviseUnsetPreferredLocation: 4,
  adviseSetAccessedBy: 5,
  adviseUnsetAccessedBy: 6,
  /** cudaCpuDeviceId / hipCpuDeviceId */
  cpuDeviceId: -1,
  /** cudaStreamCaptureModeThreadLocal / hipStreamCaptureModeThreadLocal: other threads may go on calling the runtime. */
  captureModeThreadLocal: 1,
  /** cudaMemcpySrcAccessOrderStream / hipMemcpySrcAccessOrderStream */
  srcAccessOrderStream: 1,
  /** cudaMemLocationTypeDevice / Host */
  memLocationDevice: 1,
  memLocationHost: 2,
} as const;

/** Status codes a backend treats specially. Each vendor gives its own table (the codes mostly agree, not always). */
export interface StatusTable {
  success: number;
  notReady: number;
  outOfMemory: readonly number[];
  noDevice: readonly number[];
  peerAccessAlreadyEnabled: number;
  peerAccessNotEnabled: number;
  hostMemoryAlreadyRegistered: number;
  /** Errors after which the device context is corrupt: every later call fails. */
  sticky: readonly number[];
}
