/**
 * The one interface every backend implements. A backend is a plain object built by a factory
 * (`createCudaBackend`, `createHipBackend`, `createHostBackend`) and chosen by {@link openBackend}.
 *
 * The backend layer is deliberately thin and unchecked: it trusts its caller. The memory/ and stream/ layers
 * validate every size, offset, pointer and state before they call it, because a native call with a bad pointer
 * can crash the process. Addresses and handles are plain numbers (below 2^53); koffi objects never leave backend/.
 */
import type { DeviceInfo, DeviceMemoryUse, LibraryRecord, PeerLink } from './device-types.js';
import type { KernelArg, KernelSource, LaunchConfig, CompiledModule } from './kernel-types.js';
import type { BatchOutcome, HostCopier, NativeCopyBatch } from './copy-types.js';

export type { DeviceInfo, DeviceMemoryUse, LibraryRecord, PcieLink, PeerLink, ProcessMemoryUse, XnackState } from './device-types.js';
export type { CompiledModule, HostKernel, HostMemoryResolver, KernelArg, KernelArgType, KernelSource, LaunchConfig } from './kernel-types.js';
export type { BatchLocation, BatchOutcome, HostCopier, NativeCopyBatch } from './copy-types.js';

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
  /**
   * The host copier (createHostCopier) copies on worker threads of its own, which take tens of milliseconds to start
   * and pin the staging ring with the runtime's allocator: a runtime starts them ahead and its stagers share them.
   * False where copies run on the JS thread (the host backend: its addresses are its own, no thread can reach them).
   */
  hostCopierThreads: boolean;
  /** Files can go between storage and device memory through cuFile (GPUDirect Storage, NVIDIA's), where libcufile loads. */
  gpuDirectStorage: boolean;
  /**
   * Device memory is a GPU's: false on the host backend, whose "device" memory is CPU memory standing in for one, so
   * its figures say nothing of PCIe, pinning or page migration, and staging through pinned memory gains nothing.
   */
  gpuMemory: boolean;
  /** The vendor's collective library (NCCL on CUDA, RCCL on HIP) can run on the runtime's devices, where it loads. */
  vendorCollectives: boolean;
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

  mallocAsync(device: number, bytes: number, stream: Handle): Address;
  freeAsync(address: Address, stream: Handle): void;
  configureMemPool(device: number, options: MemPoolOptions): void;
  trimMemPool(device: number, keepBytes: number): void;

  createStream(device: number, options: StreamOptions): Handle;
  destroyStream(device: number, stream: Handle): void;
  /** Synchronizes a stream; for handle 0, the default stream of `device` (the current device's when absent). */
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

  /**
   * A pool of `threads` threads for host-to-host copies, able to pin memory with the runtime's own allocator where
   * the runtime has threads for it (`capabilities.hostCopierThreads`); the host backend copies on the JS thread.
   */
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
