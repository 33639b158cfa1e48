/**
 * The one interface every backend implements. A backend is a plain object built by a factory
 * (`createCudaBackend`, `createHipBackend`, `createHostBackend`) and chosen by {@link openBackend}.
 *
 * The backend layer is deliberately thin and unchecked: it trusts its caller. The memory/ and stream/ layers
 * validate every size, offset, pointer and state before they call it, because a native call with a bad pointer
 * can crash the process. Addresses and handles are plain numbers (below 2^53); koffi objects never leave backend/.
 */

/** Names of the backends. */
export type BackendName = 'cuda' | 'hip' | 'host';
export const BACKEND_NAMES: readonly BackendName[] = ['cuda', 'hip', 'host'];

/** A device or host address. Always an integer below Number.MAX_SAFE_INTEGER. */
export type Address = number;
/** An opaque native handle (stream, event, module, function, memory pool). 0 is the null/default stream. */
export type Handle = number;

/** What a backend can do. What is false here is refused by the memory layer with an `UNSUPPORTED` error. */
export interface BackendCapabilities {
  /** Managed (unified) memory: mallocManaged, prefetch, advise. */
  managedMemory: boolean;
  /** Pinned host memory mapped into the device's address space (zero-copy). */
  mappedMemory: boolean;
  /** Pinning existing pageable memory (hostRegister). */
  hostRegister: boolean;
  /** Write-combined pinned memory. */
  writeCombined: boolean;
  /** The runtime's stream-ordered allocator (cudaMallocAsync / hipMallocAsync). */
  streamOrderedAllocator: boolean;
  /** The virtual memory API (cuMemCreate / hipMemCreate + map). */
  virtualMemory: boolean;
  /** Peer access between devices. */
  peerAccess: boolean;
  /** Run-time compilation of kernels (nvrtc / hiprtc); the host backend runs kernels as JavaScript. */
  kernels: boolean;
  /** Host functions that block their stream until they have run (cudaLaunchHostFunc / hipLaunchHostFunc). */
  blockingHostCallbacks: boolean;
  /** AMD: fine-grained device memory (hipExtMallocWithFlags + hipDeviceMallocFinegrained). */
  fineGrainedDeviceMemory: boolean;
  /** AMD: uncached device memory (hipDeviceMallocUncached). */
  uncachedDeviceMemory: boolean;
  /** AMD: coherent and non-coherent pinned host memory (hipHostMallocCoherent / NonCoherent). */
  coherentHostMemory: boolean;
  /** AMD: pinned host memory placed as the calling thread's NUMA policy says (hipHostMallocNumaUser). */
  numaHostMemory: boolean;
  /** AMD: hipMemAdvise's coarse-grain values and the coherency-mode query (hipMemRangeAttributeCoherencyMode). */
  coherencyControl: boolean;
  /** Many copies enqueued by one native call (cudaMemcpyBatchAsync from CUDA 12.8, hipMemcpyBatchAsync from ROCm 7.1). */
  batchCopies: boolean;
  /** Stream capture into graphs, launched with one call (cudaStreamBeginCapture ... cudaGraphLaunch; hipGraph*). */
  graphs: boolean;
}

/** One loaded (or tried) native library. */
export interface LibraryRecord {
  /** What it is for: runtime, driver, compiler, management. */
  role: 'runtime' | 'driver' | 'compiler' | 'management' | 'collectives';
  /** Library name searched for, e.g. libcudart.so.13. */
  name: string;
  /** Resolved file path, when known. */
  path?: string | undefined;
  /** The environment variable that overrides this library's path. */
  envVar: string;
  loaded: boolean;
  /** Why it could not be loaded, when it could not. */
  error?: string | undefined;
}

/** Facts about one device. A value that cannot be read is absent, never zero. */
export interface DeviceInfo {
  index: number;
  name?: string | undefined;
  /** Architecture: sm_90, gfx942, x86_64 (host). */
  arch?: string | undefined;
  /** AMD: the full architecture name with its features, e.g. gfx942:sramecc+:xnack-. */
  archName?: string | undefined;
  totalBytes?: number | undefined;
  freeBytes?: number | undefined;
  /** Streaming multiprocessors (NVIDIA) or compute units (AMD) or CPU cores (host). */
  multiprocessors?: number | undefined;
  l2Bytes?: number | undefined;
  asyncEngines?: number | undefined;
  managedMemory?: boolean | undefined;
  concurrentManagedAccess?: boolean | undefined;
  pageableMemoryAccess?: boolean | undefined;
  /**
   * AMD: XNACK (retry on page fault), which lets kernels fault on managed and pageable memory and have it migrated.
   * `enabled` is decided as the runtime decides it: hipDeviceAttributePageableMemoryAccess (the runtime's own answer,
   * HSA's SVM_ACCESSIBLE_BY_DEFAULT), else the target's xnack+ / xnack- suffix, which HSA_XNACK set for this process;
   * `source` says which. `arch` is the suffix, `env` what HSA_XNACK asks for.
   */
  xnack?: XnackState | undefined;
  integrated?: boolean | undefined;
  canMapHostMemory?: boolean | undefined;
  pciBusId?: string | undefined;
  link?: PcieLink | undefined;
  numaNode?: number | undefined;
  /** Memory bus width in bits and peak memory clock, where the runtime tells. */
  memoryBusWidthBits?: number | undefined;
  memoryClockKHz?: number | undefined;
  computeCapability?: string | undefined;
  streamPriorityRange?: { least: number; greatest: number } | undefined;
}

/** XNACK as a device reports it; see DeviceInfo.xnack. */
export interface XnackState {
  arch?: boolean | undefined;
  env?: string | undefined;
  enabled?: boolean | undefined;
  source?: 'runtime' | 'arch' | undefined;
}

/** PCIe link state read from sysfs: generation (from the transfer rate), width in lanes, current and maximum. */
/** Memory a process holds on a device, as the management library reports it. */
export interface ProcessMemoryUse {
  pid: number;
  /** Bytes, or undefined where the library cannot say (NVML inside some containers). */
  usedBytes: number | undefined;
}

/** A device's memory as a monitor sees it: totals, and the processes holding memory where they can be listed. */
export interface DeviceMemoryUse {
  name?: string | undefined;
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  /** Memory the driver and firmware set aside (NVML's memory v2), neither used nor free; undefined where unknown. */
  reservedBytes?: number | undefined;
  /** Processes with memory on the device; undefined where this backend cannot list them. */
  processes: ProcessMemoryUse[] | undefined;
  /**
   * Where the figures come from: `nvml` or `rocm-smi` (the management libraries: no context is created on the
   * device), `runtime`
   * (the runtime's memGetInfo: creates this process's context on the device, itself a few hundred MiB), `host`.
   */
  source: 'nvml' | 'amd-smi' | 'rocm-smi' | 'runtime' | 'host';
  /**
   * AMD: GTT memory (system memory mapped for the GPU), as AMD SMI counts it. On an APU it is most of the GPU's memory
   * and is counted in the totals above as well.
   */
  gttTotalBytes?: number | undefined;
  gttUsedBytes?: number | undefined;
  /** Why the figures come from a fallback (the management library's error), when they do. */
  note?: string | undefined;
  /**
   * The device's identity across machines and reboots: NVML's UUID (GPU-xxxxxxxx-...), ROCm SMI's unique id (0x...),
   * or on the host backend one made from the machine id and the device index. Undefined where it cannot be read.
   */
  uuid?: string | undefined;
  /** Percent of the last sample period a kernel ran (NVML utilization.gpu, ROCm SMI busy percent). */
  utilizationPercent?: number | undefined;
  /** PCIe throughput in bytes per second, device to host (tx) and host to device (rx), where the library gives it without blocking. */
  pcieTxBytesPerSecond?: number | undefined;
  pcieRxBytesPerSecond?: number | undefined;
}

/** The link between two devices. */
export interface PeerLink {
  /** nvlink, xgmi, pcie, host (the host backend's logical devices share CPU memory), or unknown. */
  kind: 'nvlink' | 'xgmi' | 'pcie' | 'host' | 'unknown';
  /** The runtime lets one device address the other's memory. */
  peerAccess: boolean;
  /** How the devices meet on PCIe (NVML's topology level), or AMD SMI's / ROCm SMI's hop count. */
  detail?: string | undefined;
  source: 'nvml' | 'amd-smi' | 'rocm-smi' | 'runtime' | 'host';
}

export interface PcieLink {
  generation?: number | undefined;
  width?: number | undefined;
  maxGeneration?: number | undefined;
  maxWidth?: number | undefined;
  /** Transfer rate per lane in GT/s, as sysfs gives it. */
  speedGTs?: number | undefined;
  maxSpeedGTs?: number | undefined;
}

/** Copy direction, in the runtime's numbering (CUDA and HIP agree: 0..4). */
export const enum CopyKind {
  HostToHost = 0,
  HostToDevice = 1,
  DeviceToHost = 2,
  DeviceToDevice = 3,
  Default = 4,
}

/** Flags for pinned host memory. The AMD-only ones need the matching capability. */
export interface PinnedFlags {
  portable?: boolean | undefined;
  mapped?: boolean | undefined;
  writeCombined?: boolean | undefined;
  /**
   * AMD: coherent (fine-grained: hipHostMallocCoherent) or non-coherent (coarse-grained: hipHostMallocNonCoherent)
   * pinned memory. The HIP backend always passes one of the two; unset means coherent, as hipHostMalloc's default
   * flags (hipHostMallocDefault, which PyTorch's pinned memory uses) give.
   */
  coherent?: boolean | undefined;
  /** AMD: place the pages on the NUMA node of the current device (hipHostMallocNumaUser). */
  numaUser?: boolean | undefined;
  /** Place the pages on this host NUMA node (AMD: hipHostMallocNumaUser; elsewhere mbind, then hostRegister). */
  numaNode?: number | undefined;
}

/** Flags for device memory. AMD only; CUDA reports them unsupported in its capabilities. */
export interface DeviceMallocFlags {
  fineGrained?: boolean | undefined;
  uncached?: boolean | undefined;
}

/** Where managed memory should go. */
export type MemLocation = { type: 'device'; device: number } | { type: 'host' };

/** Managed-memory advice. */
export type MemAdvice =
  | 'read-mostly'
  | 'unset-read-mostly'
  | 'preferred-location'
  | 'unset-preferred-location'
  | 'accessed-by'
  | 'unset-accessed-by'
  /** AMD (capabilities.coherencyControl): hipMemAdviseSetCoarseGrain / hipMemAdviseUnsetCoarseGrain. */
  | 'coarse-grain'
  | 'unset-coarse-grain';

/** How a range of memory is kept coherent (hipMemRangeCoherencyMode): fine-grained, coarse-grained, or mixed. */
export type CoherencyMode = 'fine-grained' | 'coarse-grained' | 'indeterminate';

/** A kernel argument as the backend marshals it. */
export type KernelArg =
  | { type: 'ptr'; value: Address }
  | { type: 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: number | bigint };

/** A kernel launch configuration. */
export interface LaunchConfig {
  grid: [number, number, number];
  block: [number, number, number];
  sharedBytes: number;
  stream: Handle;
}

/**
 * Source of a set of kernels. `source` is CUDA C++ that hiprtc also compiles; `host` holds the same kernels as
 * JavaScript for the host backend.
 */
export interface KernelSource {
  name: string;
  source: string;
  /** Each kernel's parameter types, in order. */
  kernels: Readonly<Record<string, readonly KernelArgType[]>>;
  host: Readonly<Record<string, HostKernel>>;
}

/** Types a kernel parameter can have. */
export type KernelArgType = KernelArg['type'];

/** Memory the host backend hands to a JS kernel: the bytes at an address, up to the end of its allocation. */
export interface HostMemoryResolver {
  /** A DataView/bytes of `bytes` bytes at `address`. Throws if the range is not inside one allocation. */
  bytes(address: Address, bytes: number): Uint8Array;
}

/** A kernel implemented in JavaScript for the host backend. Arguments are the raw values of `KernelArg`s. */
export type HostKernel = (
  mem: HostMemoryResolver,
  config: { grid: [number, number, number]; block: [number, number, number] },
  args: ReadonlyArray<number | bigint>,
) => void;

/** A compiled module's binary and how it was obtained. */
export interface CompiledModule {
  image: Uint8Array;
  /** True when the binary came from the on-disk cache. */
  cached: boolean;
  compileMs?: number | undefined;
  log?: string | undefined;
}

/** Copies between host addresses on parallel threads (the chunk copies of a staged transfer). */
export interface HostCopier {
  readonly threads: number;
  /** Copies `bytes` from `src` to `dst` (host addresses, already checked), split over the threads. */
  copy(dst: Address, src: Address, bytes: number): Promise<void>;
  /** Many copies as one job (a gather into a chunk or a scatter out of it), split over the threads. */
  copyMany?(dsts: ArrayLike<Address>, srcs: ArrayLike<Address>, sizes: ArrayLike<number>): Promise<void>;
  /**
   * Reads bytes `[offset, offset + bytes)` of the open file `fd` into host memory at `dst` on the threads (pread);
   * at least `need` bytes (default all) must be there. Where absent, the caller reads through its own means.
   * @throws GpuError IO_ERROR (rejects) for a failed read or a file that ends before `need`.
   */
  readFile?(fd: number, dst: Address, bytes: number, offset: number, need?: number): Promise<void>;
  /** Writes `bytes` of host memory at `src` to the open file `fd` at `offset` on the threads (pwrite). @throws IO_ERROR */
  writeFile?(fd: number, src: Address, bytes: number, offset: number): Promise<void>;
  /** Resolves once the threads are up (at once where there are none to start). */
  readonly ready?: Promise<void>;
  /** The share (0 to 1) of a file range's pages in the page cache, where it can be told (mincore). */
  cachedShare?(fd: number, offset: number, bytes: number): number | undefined;
  /** Drops a file range's clean pages from the page cache (posix_fadvise DONTNEED); false where that cannot be done. */
  dropCache?(fd: number, offset: number, bytes: number): boolean;
  /** Waits on this thread until the work already posted has finished (the threads keep running). */
  waitIdle?(): void;
  /** Lets the threads pin memory with the runtime's allocator (the library's path as the backend loaded it). */
  configurePinning?(library: string, symbol: 'cudaHostAlloc' | 'hipHostMalloc'): void;
  /** Whether pinHost works (configurePinning was called). */
  readonly canPin?: boolean;
  /** Portable pinned host memory allocated on a copier thread; free it with the backend's hostFree. @throws NATIVE */
  pinHost?(bytes: number): Promise<Address>;
  /** Waits on this thread for the copies already started, refuses the rest, and stops the threads. Idempotent. */
  dispose(): void;
}

/** Where a batched copy's operand lives, as the batch call's location hints name it. */
export type BatchLocation = { type: 'device'; device: number } | { type: 'host' };

/**
 * A batch of copies for one native call: addresses and sizes as pairs of 32-bit halves (low, high) per copy, and
 * runs of copies that share their operands' locations (`first` is the index of a run's first copy).
 */
export interface NativeCopyBatch {
  count: number;
  dsts: Uint32Array;
  srcs: Uint32Array;
  sizes: Uint32Array;
  runs: ReadonlyArray<{ first: number; src: BatchLocation; dst: BatchLocation }>;
}

/** What the batch call did with a batch: which way the copies went, said in every copyBatch result. */
export interface BatchOutcome {
  /** 'batch': the runtime's batch call carried the copies; 'loop': one copy call each (the batch call was refused). */
  readonly path: 'batch' | 'loop';
  /** How the batch call was made: one attribute per run of copies, or none (ROCm 7.1 to 7.12 refuse any). */
  readonly attributes?: 'per-run' | 'none' | undefined;
  /** The most copies one batch call carries (HIP: 8192); larger batches take several calls. Absent: no limit. */
  readonly copiesPerCall?: number | undefined;
  /** Why the copies did not go the first way tried, when they did not. */
  readonly note?: string | undefined;
}

/** Stream creation options. */
export interface StreamOptions {
  priority?: number | undefined;
  nonBlocking?: boolean | undefined;
}

/** Event creation options. */
export interface EventOptions {
  timing?: boolean | undefined;
  /** Waiting on the event sleeps instead of spinning a CPU core (cudaEventBlockingSync / hipEventBlockingSync). */
  blockingSync?: boolean | undefined;
}

/** Options of the runtime's stream-ordered pool. */
export interface MemPoolOptions {
  releaseThresholdBytes?: number | undefined;
}

/** Granularity and handles of the virtual memory API. */
export interface VirtualMemoryApi {
  granularity(device: number): number;
  reserve(bytes: number, alignment: number): Address;
  free(address: Address, bytes: number): void;
  create(device: number, bytes: number): Handle;
  release(handle: Handle): void;
  map(address: Address, bytes: number, handle: Handle): void;
  setAccess(address: Address, bytes: number, device: number): void;
  unmap(address: Address, bytes: number): void;
}

/**
 * The backend interface. Methods are synchronous unless they return a Promise. A failed native call throws a
 * GpuError carrying the runtime's status; after a sticky device error every method throws `DEVICE_UNUSABLE`.
 */
export interface Backend {
  readonly name: BackendName;
  readonly capabilities: Readonly<BackendCapabilities>;
  /** Runtime version as the vendor writes it ("13.0", "6.2.41133"), when known. */
  readonly runtimeVersion: string | undefined;
  readonly driverVersion: string | undefined;
  readonly libraries: readonly LibraryRecord[];
  /** Set when a sticky error made the backend unusable. */
  readonly unusableReason: string | undefined;
  /** The vendor install the libraries came from (ROCm: /opt/rocm-6.2.0), where that is one folder. */
  readonly installRoot?: string | undefined;

  deviceCount(): number;
  /** Why deviceCount() answered 0 (the runtime's status name and text), when it did. */
  noDeviceReason(): string | undefined;
  deviceInfo(device: number): DeviceInfo;
  memGetInfo(device: number): { freeBytes: number; totalBytes: number };
  /** The device's memory use for a monitor, through the management library where there is one. */
  memoryUse(device: number): DeviceMemoryUse;
  synchronizeDevice(device: number): void;

  malloc(device: number, bytes: number, flags?: DeviceMallocFlags): Address;
  free(device: number, address: Address): void;
  hostAlloc(device: number, bytes: number, flags: PinnedFlags): Address;
  hostFree(address: Address): void;
  hostDevicePointer(address: Address): Address;
  mallocManaged(device: number, bytes: number, attachHost: boolean): Address;
  /** Pins existing host memory. */
  hostRegister(address: Address, bytes: number, mapped: boolean): void;
  hostUnregister(address: Address): void;
  /** The address of a JS ArrayBuffer's bytes (pageable memory). The caller keeps the buffer alive. */
  adoptHostBuffer(buffer: ArrayBuffer): Address;
  /** Forgets a buffer adopted with adoptHostBuffer. */
  releaseHostBuffer(address: Address): void;
  /** The bytes of host-visible memory at an address (no copy). Valid only while the memory is allocated. */
  hostView(address: Address, bytes: number): Uint8Array;

  prefetch(address: Address, bytes: number, to: MemLocation, stream: Handle): void;
  /** How a range is kept coherent, where `capabilities.coherencyControl`; undefined where the runtime cannot say. */
  coherencyMode(address: Address, bytes: number): CoherencyMode | undefined;
  advise(address: Address, bytes: number, advice: MemAdvice, location: MemLocation): void;

  memcpy(dst: Address, src: Address, bytes: number, kind: CopyKind): void;
  memcpyAsync(dst: Address, src: Address, bytes: number, kind: CopyKind, stream: Handle): void;
  memcpyPeerAsync(dst: Address, dstDevice: number, src: Address, srcDevice: number, bytes: number, stream: Handle): void;
  /** `device` names whose default stream handle 0 means (the current device's when absent). */
  memsetAsync(address: Address, value: number, bytes: number, stream: Handle, device?: number): void;
  /** Synchronizes a stream; for handle 0, the default stream of `device` (the current device's when absent). */

  mallocAsync(device: number, bytes: number, stream: Handle): Address;
  freeAsync(address: Address, stream: Handle): void;
  configureMemPool(device: number, options: MemPoolOptions): void;
  trimMemPool(device: number, keepBytes: number): void;

  createStream(device: number, options: StreamOptions): Handle;
  destroyStream(device: number, stream: Handle): void;
  synchronizeStream(stream: Handle, device?: number): void;
  synchronizeStreamAsync(stream: Handle): Promise<void>;
  queryStream(stream: Handle): boolean;
  streamWaitEvent(stream: Handle, event: Handle): void;
  /** Runs `fn` on the JS thread; the stream waits until it has returned. */
  launchHostFunc(stream: Handle, fn: () => void): void;

  createEvent(device: number, options: EventOptions): Handle;
  destroyEvent(event: Handle): void;
  recordEvent(event: Handle, stream: Handle): void;
  synchronizeEvent(event: Handle): void;
  synchronizeEventAsync(event: Handle): Promise<void>;
  queryEvent(event: Handle): boolean;
  elapsedMs(start: Handle, end: Handle): number;

  canAccessPeer(device: number, peer: number): boolean;
  /** Makes `device` current on this thread, for libraries that act on the current device (NCCL's ncclMemAlloc). */
  useDevice(device: number): void;
  /** What connects two devices, where the management library says (NVML, ROCm SMI); the runtime's peer access always. */
  peerLink(device: number, peer: number): PeerLink;
  enablePeerAccess(device: number, peer: number): void;
  disablePeerAccess(device: number, peer: number): void;

  /** Compiles (or takes from the cache) a kernel source for a device. */
  compile(device: number, source: KernelSource): CompiledModule;
  loadModule(device: number, source: KernelSource, compiled: CompiledModule): Handle;
  unloadModule(module: Handle): void;
  getFunction(module: Handle, name: string): Handle;
  /** Packs kernel arguments once so that repeated launches allocate nothing. */
  packArgs(args: readonly KernelArg[]): unknown;
  launch(fn: Handle, config: LaunchConfig, packed: unknown): void;

  /**
   * Enqueues every copy of `batch` on `stream` with the runtime's batch call, where `capabilities.batchCopies`: in as
   * few calls as the release takes, one copy call each where it refuses the batch call. Answers which way they went.
   */
  memcpyBatchAsync(batch: NativeCopyBatch, stream: Handle): BatchOutcome;

  /** A pool of `threads` threads for host-to-host copies (the host backend copies on the JS thread). */
  createHostCopier(threads: number): HostCopier;

  // Graphs, where `capabilities.graphs`. Capture records the work enqueued on one stream until it ends.
  beginCapture(stream: Handle): void;
  /** Ends the capture and answers the graph; after a failed capture the graph is destroyed and this throws. */
  endCapture(stream: Handle): Handle;
  instantiateGraph(graph: Handle): Handle;
  launchGraph(exec: Handle, stream: Handle): void;
  destroyGraphExec(exec: Handle): void;
  destroyGraph(graph: Handle): void;
  /**
   * During a capture: a host function node that runs `fn` on the JS thread at every launch of the graph. Answers
   * the function that releases it (call it once the graph is destroyed).
   */
  captureHostFunc(stream: Handle, fn: () => void): () => void;
  /** Counts host functions a launch is about to run, so that blocking calls refuse meanwhile (WOULD_DEADLOCK). */
  expectHostCalls(count: number): void;

  /** The virtual memory API, where `capabilities.virtualMemory`. */
  readonly vmm: VirtualMemoryApi | undefined;

  /** Releases what the backend holds (modules, registered callbacks). Idempotent. */
  dispose(): void;
}
