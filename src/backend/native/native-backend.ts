/**
 * What the CUDA and HIP backends have in common: both runtimes share one API shape (cudaMalloc / hipMalloc,
 * cudaStreamCreate / hipStreamCreate, ...), so one class drives either through the functions its vendor's ffi.ts
 * declared. The vendor subclasses add what differs: device facts, allocation flags, prefetch and advice
 * signatures, the compiler and module loader.
 */
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import type {
  Address,
  Backend,
  BackendCapabilities,
  BackendName,
  CompiledModule,
  CopyKind,
  DeviceInfo,
  DeviceMallocFlags,
  DeviceMemoryUse,
  EventOptions,
  Handle,
  HostCopier,
  KernelArg,
  KernelSource,
  LaunchConfig,
  LibraryRecord,
  MemAdvice,
  MemLocation,
  MemPoolOptions,
  NativeCopyBatch,
  PeerLink,
  PinnedFlags,
  StreamOptions,
  VirtualMemoryApi,
} from '../backend.js';
import { addressOf, cString, packKernelArgs, viewOf, type NativeFn } from './ffi.js';
import { HostCallbacks } from './host-callbacks.js';
import { ThreadedHostCopier } from './host-copier.js';
import { errorForStatus, StatusNames } from './status.js';
import { mapOnNode, unmapNodeMemory } from './numa-memory.js';
import { nativeVmm } from './vmm.js';
import { compileSource, type RtcCompiler } from './rtc.js';
import { dropUndefined } from '../device-info.js';
import { pciFacts } from '../sysfs.js';
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
  /** True when the bound MemcpyBatchAsync takes a failIdx out-parameter (CUDA 12.8-12.9, ROCm 7.1). */
  batchFailIndex: boolean;
}

/** What each vendor decides itself: kernels (which compiler and loader it has) and the AMD-only memory kinds. */
export type VendorCapabilities = Pick<
  BackendCapabilities,
  'kernels' | 'fineGrainedDeviceMemory' | 'uncachedDeviceMemory' | 'coherentHostMemory' | 'numaHostMemory'
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

const ADVICE: Record<MemAdvice, number> = {
  'read-mostly': RUNTIME_FLAGS.adviseSetReadMostly,
  'unset-read-mostly': RUNTIME_FLAGS.adviseUnsetReadMostly,
  'preferred-location': RUNTIME_FLAGS.adviseSetPreferredLocation,
  'unset-preferred-location': RUNTIME_FLAGS.adviseUnsetPreferredLocation,
  'accessed-by': RUNTIME_FLAGS.adviseSetAccessedBy,
  'unset-accessed-by': RUNTIME_FLAGS.adviseUnsetAccessedBy,
};

/** Base class of the CUDA and HIP backends. */
export abstract class NativeBackend implements Backend {
  readonly name: Exclude<BackendName, 'host'>;
  readonly capabilities: Readonly<BackendCapabilities>;
  readonly runtimeVersion: string | undefined;
  readonly driverVersion: string | undefined;
  readonly libraries: readonly LibraryRecord[];
  readonly vmm: VirtualMemoryApi | undefined;

  protected readonly fn: Record<string, NativeFn>;
  protected readonly status: StatusTable;
  private readonly statusNames: StatusNames;
  private unusable: string | undefined;
  private noDevice: string | undefined;
  private current = -1;
  private readonly hostCallbacks = new HostCallbacks();
  private readonly outP: number[] = [0];
  private readonly outA: number[] = [0];
  private readonly outB: number[] = [0];
  private readonly outF: number[] = [0];
  private readonly pools = new Map<number, number>();
  private disposed = false;
  private readonly modules: NativeParts['modules'];
  private readonly rtc: RtcCompiler | undefined;
  private readonly archs = new Map<number, string>();
  private readonly outM: number[] = [0];
  private readonly attrs: DeviceAttributeIds;
  private readonly batchFailIndex: boolean;
  private readonly outFail: number[] = [0];
  /** Pinned memory placed on a NUMA node by mapOnNode: address to bytes. */
  private readonly nodeMapped = new Map<number, number>();

  constructor(parts: NativeParts) {
    this.name = parts.name;
    this.fn = parts.fns;
    this.status = parts.status;
    this.statusNames = new StatusNames(parts.fns);
    this.capabilities = Object.freeze({ ...parts.capabilities });
    this.runtimeVersion = parts.runtimeVersion;
    this.driverVersion = parts.driverVersion;
    this.libraries = parts.libraries;
    this.modules = parts.modules;
    this.rtc = parts.rtc;
    this.vmm = parts.vmm
      ? nativeVmm(parts.vmm.fns, {
          fail: (status, call) => this.fail(status, `${this.name} ${call}`, parts.vmm!.statusName),
          guard: () => this.guard(),
          prepareContext: (device) => this.prepareContext(device),
          oom: (e, device, bytes) => this.oom(e, device, bytes, 'physical allocation'),
        })
      : undefined;
    this.attrs = parts.deviceAttributes;
    this.batchFailIndex = parts.batchFailIndex;
  }

  get unusableReason(): string | undefined {
    return this.unusable;
  }

  // ---- errors -------------------------------------------------------------------------------------------

  /** The runtime's name for a status code. */
  statusName(status: number): string {
    return this.statusNames.name(status);
  }

  /**
   * Maps a failed status to a typed error; a sticky status also marks the backend unusable. `names` resolves
   * codes of another API (CUDA's driver API) whose numbers agree with the runtime's for the cases handled here.
   */
  protected fail(status: number, call: string, names?: (status: number) => string): GpuError {
    const { error, sticky } = errorForStatus(
      this.name,
      this.status,
      status,
      call,
      names ? { name: names(status), text: '' } : this.statusNames.describe(status),
    );
    if (sticky) this.unusable = sticky;
    return error;
  }

  protected check(status: number, call: string): void {
    if (status !== 0) throw this.fail(status, call);
  }

  protected guard(): void {
    if (this.unusable !== undefined) {
      throw new GpuError(ErrorCode.DEVICE_UNUSABLE, `the ${this.name} backend is unusable after an earlier error: ${this.unusable}`, { backend: this.name });
    }
    if (this.disposed) throw new GpuError(ErrorCode.DISPOSED, `the ${this.name} backend was disposed`, { backend: this.name });
  }

  /** Refuses a blocking call while a blocking host callback waits for this (the JS) thread. */
  protected guardBlocking(call: string): void {
    this.guard();
    const waiting = this.hostCallbacks.pending;
    if (waiting > 0) {
      throw new GpuError(
        ErrorCode.WOULD_DEADLOCK,
        `${call} would block while ${waiting} blocking host callback(s) wait to run on this thread; await stream.synchronize() instead`,
        { backend: this.name },
      );
    }
  }

  protected use(device: number): void {
    if (this.current === device) return;
    this.check(this.fn.SetDevice!(device) as number, `${this.name}SetDevice(${device})`);
    this.current = device;
  }

  private callAsync(f: NativeFn, args: unknown[], call: string): Promise<void> {
    return new Promise((resolve, reject) => {
      f.async(...args, (err: unknown, status: number) => {
        if (err) reject(err);
        else if (status !== 0) reject(this.fail(status, call));
        else resolve();
      });
    });
  }

  // ---- devices ------------------------------------------------------------------------------------------

  deviceCount(): number {
    this.guard();
    const status = this.fn.GetDeviceCount!(this.outA) as number;
    if (this.status.noDevice.includes(status)) {
      this.noDevice = this.explainNoDevice(status, this.statusNames.describe(status));
      return 0;
    }
    this.check(status, `${this.name}GetDeviceCount`);
    this.noDevice = this.outA[0] === 0 ? 'the runtime reports 0 devices' : undefined;
    return this.outA[0]!;
  }

  noDeviceReason(): string | undefined {
    return this.noDevice;
  }

  /** Why the runtime found no device, in words a user acts on; vendors add what their status alone does not say. */
  protected explainNoDevice(_status: number, described: { name: string; text: string }): string {
    return `${described.name}${described.text ? `: ${described.text}` : ''}`;
  }

  /** What the runtime tells of a device; fields it cannot tell are absent. */
  deviceInfo(device: number): DeviceInfo {
    this.guard();
    const ids = this.attrs;
    const a = (attr: number): number | undefined => this.attribute(attr, device);
    const flag = (attr: number): boolean | undefined => {
      const v = a(attr);
      return v === undefined ? undefined : v !== 0;
    };
    const info: DeviceInfo = { index: device, name: this.deviceName(device) };
    const major = a(ids.ccMajor);
    const minor = a(ids.ccMinor);
    if (major !== undefined && minor !== undefined) info.computeCapability = `${major}.${minor}`;
    try {
      const m = this.memGetInfo(device);
      info.totalBytes = m.totalBytes;
      info.freeBytes = m.freeBytes;
    } catch {
      // unknown stays absent
    }
    info.multiprocessors = a(ids.multiprocessorCount);
    info.l2Bytes = a(ids.l2CacheSize);
    info.asyncEngines = a(ids.asyncEngineCount);
    info.managedMemory = flag(ids.managedMemory);
    info.concurrentManagedAccess = flag(ids.concurrentManagedAccess);
    info.pageableMemoryAccess = flag(ids.pageableMemoryAccess);
    info.integrated = flag(ids.integrated);
    info.canMapHostMemory = flag(ids.canMapHostMemory);
    info.memoryBusWidthBits = a(ids.memoryBusWidth);
    info.memoryClockKHz = a(ids.memoryClockRate);
    info.streamPriorityRange = this.priorityRange(device);
    const bus = this.pciBusId(device);
    if (bus) {
      info.pciBusId = bus;
      Object.assign(info, pciFacts(bus));
    }
    this.addVendorDeviceInfo(device, info);
    return dropUndefined(info);
  }

  /** Adds what only this vendor's runtime tells (the compile target, XNACK). */
  protected abstract addVendorDeviceInfo(device: number, info: DeviceInfo): void;

  /** An integer device attribute, or undefined when the runtime cannot tell. */
  protected attribute(attr: number, device: number): number | undefined {
    const out = [0];
    return (this.fn.DeviceGetAttribute!(out, attr, device) as number) === 0 ? out[0] : undefined;
  }

  protected pciBusId(device: number): string | undefined {
    const buf = Buffer.alloc(64);
    return (this.fn.DeviceGetPCIBusId!(buf, buf.length, device) as number) === 0 ? cString(buf) : undefined;
  }

  protected priorityRange(device: number): { least: number; greatest: number } | undefined {
    this.use(device);
    const least = [0];
    const greatest = [0];
    return (this.fn.DeviceGetStreamPriorityRange!(least, greatest) as number) === 0 ? { least: least[0]!, greatest: greatest[0]! } : undefined;
  }

  memGetInfo(device: number): { freeBytes: number; totalBytes: number } {
    this.guard();
    this.use(device);
    this.check(this.fn.MemGetInfo!(this.outA, this.outB) as number, `${this.name}MemGetInfo`);
    return { freeBytes: this.outA[0]!, totalBytes: this.outB[0]! };
  }

  /** Through the runtime's memGetInfo (a context on the device); backends with a management library override it. */
  memoryUse(device: number): DeviceMemoryUse {
    const { freeBytes, totalBytes } = this.memGetInfo(device);
    return { name: this.deviceName(device), totalBytes, freeBytes, usedBytes: totalBytes - freeBytes, processes: undefined, source: 'runtime' };
  }

  /** The device's marketing name, without creating a context; undefined when the runtime cannot tell. */
  protected abstract deviceName(device: number): string | undefined;

  synchronizeDevice(device: number): void {
    this.guardBlocking(`${this.name}DeviceSynchronize`);
    this.use(device);
    this.check(this.fn.DeviceSynchronize!() as number, `${this.name}DeviceSynchronize`);
  }

  // ---- memory -------------------------------------------------------------------------------------------

  /** Adds the device's free and total bytes to an out-of-memory error. */
  protected oom(e: unknown, device: number | undefined, bytes: number, what: string): unknown {
    if (!(e instanceof OutOfMemoryError)) return e;
    let freeBytes: number | undefined;
    let totalBytes: number | undefined;
    if (device !== undefined) {
      try {
        ({ freeBytes, totalBytes } = this.memGetInfo(device));
      } catch {
        // leave them unknown
      }
    }
    const where = device === undefined ? 'host' : `device ${device}`;
    const room = freeBytes !== undefined ? ` (${freeBytes} bytes free of ${totalBytes})` : '';
    return new OutOfMemoryError(
      `out of memory: ${what} of ${bytes} bytes on ${where}${room}: ${e.message}`,
      { requestedBytes: bytes, device, freeBytes, totalBytes },
      {
        backend: this.name,
        status: e.status,
        statusName: e.statusName,
      },
    );
  }

  protected abstract deviceMallocStatus(out: number[], bytes: number, flags: DeviceMallocFlags): number;
  protected abstract hostAllocStatus(out: number[], bytes: number, flags: PinnedFlags): number;
  protected abstract hostFreeStatus(address: Address): number;

  malloc(device: number, bytes: number, flags: DeviceMallocFlags = {}): Address {
    this.guard();
    this.use(device);
    try {
      this.check(this.deviceMallocStatus(this.outP, bytes, flags), `${this.name}Malloc(${bytes})`);
    } catch (e) {
      throw this.oom(e, device, bytes, 'device allocation');
    }
    return this.outP[0]!;
  }

  free(device: number, address: Address): void {
    this.guardBlocking(`${this.name}Free`);
    this.use(device);
    this.check(this.fn.Free!(address) as number, `${this.name}Free`);
  }

  hostAlloc(device: number, bytes: number, flags: PinnedFlags): Address {
    this.guard();
    this.use(device);
    if (flags.numaNode !== undefined) {
      // AMD places pinned memory on the current device's node itself; elsewhere bind a mapping, then pin it.
      if (this.capabilities.numaHostMemory) flags = { ...flags, numaUser: true };
      else return this.hostAllocOnNode(bytes, flags.numaNode, flags);
    }
    try {
      this.check(this.hostAllocStatus(this.outP, bytes, flags), `${this.name} pinned host allocation (${bytes})`);
    } catch (e) {
      throw this.oom(e, undefined, bytes, 'pinned host allocation');
    }
    return this.outP[0]!;
  }

  /** Pinned memory on one NUMA node: an mbind-bound mapping, page-locked with hostRegister. */
  private hostAllocOnNode(bytes: number, node: number, flags: PinnedFlags): Address {
    const address = mapOnNode(bytes, node, this.name);
    try {
      this.hostRegister(address, bytes, !!flags.mapped);
    } catch (e) {
      unmapNodeMemory(address, bytes);
      throw this.oom(e, undefined, bytes, 'pinned host allocation on a NUMA node');
    }
    this.nodeMapped.set(address, bytes);
    return address;
  }

  hostFree(address: Address): void {
    this.guardBlocking(`${this.name} pinned free`);
    const mapped = this.nodeMapped.get(address);
    if (mapped !== undefined) {
      this.hostUnregister(address);
      this.nodeMapped.delete(address);
      unmapNodeMemory(address, mapped);
      return;
    }
    this.check(this.hostFreeStatus(address), `${this.name} pinned free`);
  }

  hostDevicePointer(address: Address): Address {
    this.guard();
    this.check(this.fn.HostGetDevicePointer!(this.outP, address, 0) as number, `${this.name}HostGetDevicePointer`);
    return this.outP[0]!;
  }

  mallocManaged(device: number, bytes: number, attachHost: boolean): Address {
    this.guard();
    this.use(device);
    const flags = attachHost ? RUNTIME_FLAGS.memAttachHost : RUNTIME_FLAGS.memAttachGlobal;
    try {
      this.check(this.fn.MallocManaged!(this.outP, bytes, flags) as number, `${this.name}MallocManaged(${bytes})`);
    } catch (e) {
      throw this.oom(e, device, bytes, 'managed allocation');
    }
    return this.outP[0]!;
  }

  hostRegister(address: Address, bytes: number, mapped: boolean): void {
    this.guard();
    const flags = RUNTIME_FLAGS.hostRegisterPortable | (mapped ? RUNTIME_FLAGS.hostRegisterMapped : 0);
    this.check(this.fn.HostRegister!(address, bytes, flags) as number, `${this.name}HostRegister`);
  }

  hostUnregister(address: Address): void {
    this.guardBlocking(`${this.name}HostUnregister`);
    this.check(this.fn.HostUnregister!(address) as number, `${this.name}HostUnregister`);
  }

  adoptHostBuffer(buffer: ArrayBuffer): Address {
    return addressOf(buffer);
  }

  releaseHostBuffer(_address: Address): void {
    // The ArrayBuffer owns its memory; the caller drops its reference.
  }

  hostView(address: Address, bytes: number): Uint8Array {
    return new Uint8Array(viewOf(address, bytes));
  }

  protected abstract prefetchStatus(address: Address, bytes: number, to: MemLocation, stream: Handle): number;
  protected abstract adviseStatus(address: Address, bytes: number, advice: number, location: MemLocation): number;

  prefetch(address: Address, bytes: number, to: MemLocation, stream: Handle): void {
    this.guard();
    this.check(this.prefetchStatus(address, bytes, to, stream), `${this.name}MemPrefetchAsync`);
  }

  advise(address: Address, bytes: number, advice: MemAdvice, location: MemLocation): void {
    this.guard();
    this.check(this.adviseStatus(address, bytes, ADVICE[advice], location), `${this.name}MemAdvise(${advice})`);
  }

  memcpy(dst: Address, src: Address, bytes: number, kind: CopyKind): void {
    this.guardBlocking(`${this.name}Memcpy`);
    this.check(this.fn.Memcpy!(dst, src, bytes, kind) as number, `${this.name}Memcpy`);
  }

  memcpyAsync(dst: Address, src: Address, bytes: number, kind: CopyKind, stream: Handle): void {
    this.guard();
    this.check(this.fn.MemcpyAsync!(dst, src, bytes, kind, stream) as number, `${this.name}MemcpyAsync`);
  }

  memcpyPeerAsync(dst: Address, dstDevice: number, src: Address, srcDevice: number, bytes: number, stream: Handle): void {
    this.guard();
    if (stream === 0) this.use(srcDevice);
    this.check(this.fn.MemcpyPeerAsync!(dst, dstDevice, src, srcDevice, bytes, stream) as number, `${this.name}MemcpyPeerAsync`);
  }

  memsetAsync(address: Address, value: number, bytes: number, stream: Handle, device?: number): void {
    this.guard();
    // Handle 0 is the legacy default stream of the current device: make it the memory's device.
    if (stream === 0 && device !== undefined) this.use(device);
    this.check(this.fn.MemsetAsync!(address, value, bytes, stream) as number, `${this.name}MemsetAsync`);
  }

  memcpyBatchAsync(batch: NativeCopyBatch, stream: Handle): void {
    this.guard();
    const runs = batch.runs.length;
    // cudaMemcpyAttributes / hipMemcpyAttributes: srcAccessOrder, srcLocHint {type, id}, dstLocHint {type, id}, flags.
    const attrs = Buffer.alloc(24 * runs);
    const idx = new Uint32Array(2 * runs);
    batch.runs.forEach((r, i) => {
      const o = 24 * i;
      attrs.writeInt32LE(RUNTIME_FLAGS.srcAccessOrderStream, o);
      attrs.writeInt32LE(r.src.type === 'device' ? RUNTIME_FLAGS.memLocationDevice : RUNTIME_FLAGS.memLocationHost, o + 4);
      attrs.writeInt32LE(r.src.type === 'device' ? r.src.device : 0, o + 8);
      attrs.writeInt32LE(r.dst.type === 'device' ? RUNTIME_FLAGS.memLocationDevice : RUNTIME_FLAGS.memLocationHost, o + 12);
      attrs.writeInt32LE(r.dst.type === 'device' ? r.dst.device : 0, o + 16);
      idx[2 * i] = r.first;
    });
    const f = this.fn.MemcpyBatchAsync!;
    const status = (
      this.batchFailIndex
        ? f(batch.dsts, batch.srcs, batch.sizes, batch.count, attrs, idx, runs, this.outFail, stream)
        : f(batch.dsts, batch.srcs, batch.sizes, batch.count, attrs, idx, runs, stream)
    ) as number;
    if (status !== 0) {
      const at = this.batchFailIndex && this.outFail[0]! < batch.count ? ` (copy ${this.outFail[0]} of the batch)` : '';
      throw this.fail(status, `${this.name}MemcpyBatchAsync of ${batch.count} copies${at}`);
    }
  }

  createHostCopier(threads: number): HostCopier {
    this.guard();
    return new ThreadedHostCopier(threads);
  }

  // ---- graphs -------------------------------------------------------------------------------------------

  beginCapture(stream: Handle): void {
    this.guard();
    this.check(this.fn.StreamBeginCapture!(stream, RUNTIME_FLAGS.captureModeThreadLocal) as number, `${this.name}StreamBeginCapture`);
  }

  endCapture(stream: Handle): Handle {
    this.guard();
    this.check(this.fn.StreamEndCapture!(stream, this.outP) as number, `${this.name}StreamEndCapture`);
    return this.outP[0]!;
  }

  instantiateGraph(graph: Handle): Handle {
    this.guard();
    this.check(this.fn.GraphInstantiateWithFlags!(this.outP, graph, 0) as number, `${this.name}GraphInstantiateWithFlags`);
    return this.outP[0]!;
  }

  launchGraph(exec: Handle, stream: Handle): void {
    this.guard();
    this.check(this.fn.GraphLaunch!(exec, stream) as number, `${this.name}GraphLaunch`);
  }

  destroyGraphExec(exec: Handle): void {
    this.guard();
    this.check(this.fn.GraphExecDestroy!(exec) as number, `${this.name}GraphExecDestroy`);
  }

  destroyGraph(graph: Handle): void {
    this.guard();
    this.check(this.fn.GraphDestroy!(graph) as number, `${this.name}GraphDestroy`);
  }

  captureHostFunc(stream: Handle, fn: () => void): () => void {
    this.guard();
    const reg = this.hostCallbacks.register(fn);
    const status = this.fn.LaunchHostFunc!(stream, reg.ptr, null) as number;
    if (status !== 0) {
      reg.release();
      throw this.fail(status, `${this.name}LaunchHostFunc (captured)`);
    }
    return reg.release;
  }

  expectHostCalls(count: number): void {
    this.hostCallbacks.expect(count);
  }

  // ---- stream-ordered allocator --------------------------------------------------------------------------

  mallocAsync(device: number, bytes: number, stream: Handle): Address {
    this.guard();
    this.use(device);
    try {
      this.check(this.fn.MallocAsync!(this.outP, bytes, stream) as number, `${this.name}MallocAsync(${bytes})`);
    } catch (e) {
      throw this.oom(e, device, bytes, 'stream-ordered allocation');
    }
    return this.outP[0]!;
  }

  freeAsync(address: Address, stream: Handle): void {
    this.guard();
    this.check(this.fn.FreeAsync!(address, stream) as number, `${this.name}FreeAsync`);
  }

  private defaultPool(device: number): number {
    let pool = this.pools.get(device);
    if (pool === undefined) {
      this.check(this.fn.DeviceGetDefaultMemPool!(this.outP, device) as number, `${this.name}DeviceGetDefaultMemPool`);
      pool = this.outP[0]!;
      this.pools.set(device, pool);
    }
    return pool;
  }

  configureMemPool(device: number, options: MemPoolOptions): void {
    this.guard();
    if (options.releaseThresholdBytes !== undefined) {
      const value = Buffer.alloc(8);
      value.writeBigUInt64LE(BigInt(options.releaseThresholdBytes));
      this.check(
        this.fn.MemPoolSetAttribute!(this.defaultPool(device), RUNTIME_FLAGS.memPoolAttrReleaseThreshold, value) as number,
        `${this.name}MemPoolSetAttribute(ReleaseThreshold)`,
      );
    }
  }

  trimMemPool(device: number, keepBytes: number): void {
    this.guard();
    this.check(this.fn.MemPoolTrimTo!(this.defaultPool(device), keepBytes) as number, `${this.name}MemPoolTrimTo`);
  }

  // ---- streams and events ---------------------------------------------------------------------------------

  createStream(device: number, options: StreamOptions): Handle {
    this.guard();
    this.use(device);
    const flags = options.nonBlocking ? RUNTIME_FLAGS.streamNonBlocking : 0;
    this.check(this.fn.StreamCreateWithPriority!(this.outP, flags, options.priority ?? 0) as number, `${this.name}StreamCreateWithPriority`);
    return this.outP[0]!;
  }

  destroyStream(_device: number, stream: Handle): void {
    this.guard();
    this.check(this.fn.StreamDestroy!(stream) as number, `${this.name}StreamDestroy`);
  }

  synchronizeStream(stream: Handle, device?: number): void {
    this.guardBlocking(`${this.name}StreamSynchronize`);
    if (stream === 0 && device !== undefined) this.use(device);
    this.check(this.fn.StreamSynchronize!(stream) as number, `${this.name}StreamSynchronize`);
  }

  synchronizeStreamAsync(stream: Handle): Promise<void> {
    this.guard();
    return this.callAsync(this.fn.StreamSynchronize!, [stream], `${this.name}StreamSynchronize`);
  }

  queryStream(stream: Handle): boolean {
    this.guard();
    const status = this.fn.StreamQuery!(stream) as number;
    if (status === this.status.notReady) return false;
    this.check(status, `${this.name}StreamQuery`);
    return true;
  }

  streamWaitEvent(stream: Handle, event: Handle): void {
    this.guard();
    this.check(this.fn.StreamWaitEvent!(stream, event, 0) as number, `${this.name}StreamWaitEvent`);
  }

  launchHostFunc(stream: Handle, fn: () => void): void {
    this.guard();
    this.hostCallbacks.launchOnce(fn, (ptr) => {
      const status = this.fn.LaunchHostFunc!(stream, ptr, null) as number;
      if (status !== 0) throw this.fail(status, `${this.name}LaunchHostFunc`);
    });
  }

  createEvent(device: number, options: EventOptions): Handle {
    this.guard();
    this.use(device);
    const flags = (options.timing === false ? RUNTIME_FLAGS.eventDisableTiming : 0) | (options.blockingSync ? RUNTIME_FLAGS.eventBlockingSync : 0);
    this.check(this.fn.EventCreateWithFlags!(this.outP, flags) as number, `${this.name}EventCreateWithFlags`);
    return this.outP[0]!;
  }

  destroyEvent(event: Handle): void {
    this.guard();
    this.check(this.fn.EventDestroy!(event) as number, `${this.name}EventDestroy`);
  }

  recordEvent(event: Handle, stream: Handle): void {
    this.guard();
    this.check(this.fn.EventRecord!(event, stream) as number, `${this.name}EventRecord`);
  }

  synchronizeEvent(event: Handle): void {
    this.guardBlocking(`${this.name}EventSynchronize`);
    this.check(this.fn.EventSynchronize!(event) as number, `${this.name}EventSynchronize`);
  }

  synchronizeEventAsync(event: Handle): Promise<void> {
    this.guard();
    return this.callAsync(this.fn.EventSynchronize!, [event], `${this.name}EventSynchronize`);
  }

  queryEvent(event: Handle): boolean {
    this.guard();
    const status = this.fn.EventQuery!(event) as number;
    if (status === this.status.notReady) return false;
    this.check(status, `${this.name}EventQuery`);
    return true;
  }

  elapsedMs(start: Handle, end: Handle): number {
    this.guard();
    this.check(this.fn.EventElapsedTime!(this.outF, start, end) as number, `${this.name}EventElapsedTime`);
    return this.outF[0]!;
  }

  // ---- peers --------------------------------------------------------------------------------------------

  canAccessPeer(device: number, peer: number): boolean {
    this.guard();
    this.check(this.fn.DeviceCanAccessPeer!(this.outA, device, peer) as number, `${this.name}DeviceCanAccessPeer`);
    return this.outA[0] === 1;
  }

  useDevice(device: number): void {
    this.guard();
    this.use(device);
  }

  /** Peer access from the runtime; the backends with a management library say what the link is. */
  peerLink(device: number, peer: number): PeerLink {
    return { kind: 'unknown', peerAccess: this.canAccessPeer(device, peer), source: 'runtime' };
  }

  enablePeerAccess(device: number, peer: number): void {
    this.guard();
    this.use(device);
    const status = this.fn.DeviceEnablePeerAccess!(peer, 0) as number;
    if (status === this.status.peerAccessAlreadyEnabled) {
      this.fn.GetLastError!();
      return;
    }
    this.check(status, `${this.name}DeviceEnablePeerAccess(${device} -> ${peer})`);
  }

  disablePeerAccess(device: number, peer: number): void {
    this.guard();
    this.use(device);
    const status = this.fn.DeviceDisablePeerAccess!(peer) as number;
    if (status === this.status.peerAccessNotEnabled) {
      this.fn.GetLastError!();
      return;
    }
    this.check(status, `${this.name}DeviceDisablePeerAccess(${device} -> ${peer})`);
  }

  // ---- kernels ------------------------------------------------------------------------------------------

  /** The architecture to compile for and the compiler's options (nvrtc and hiprtc spell them differently). */
  protected abstract compileTarget(device: number): { arch: string; options: string[] };

  /** Called before module loads and physical allocations: make the device's context current. */
  protected prepareContext(device: number): void {
    this.use(device);
  }

  protected unsupported(what: string): GpuError {
    return new GpuError(ErrorCode.UNSUPPORTED, `${this.name}: ${what}`, { backend: this.name });
  }

  compile(device: number, source: KernelSource): CompiledModule {
    this.guard();
    if (!this.rtc)
      throw this.unsupported(`run-time compilation: no compiler library was found (${this.libraries.find((l) => l.role === 'compiler')?.envVar ?? ''})`);
    let target = this.archs.get(device);
    const t = this.compileTarget(device);
    if (!target) this.archs.set(device, (target = t.arch));
    return compileSource(this.rtc, source, target, t.options);
  }

  private moduleCheck(status: number, call: string): void {
    if (status !== 0) throw this.fail(status, call, this.modules?.statusName);
  }

  loadModule(device: number, _source: KernelSource, compiled: CompiledModule): Handle {
    this.guard();
    if (!this.modules) throw this.unsupported('module loading: the driver library was not found');
    this.prepareContext(device);
    this.moduleCheck(this.modules.fns.ModuleLoadData!(this.outM, compiled.image) as number, `${this.name} module load`);
    return this.outM[0]!;
  }

  unloadModule(module: Handle): void {
    this.guard();
    this.moduleCheck(this.modules!.fns.ModuleUnload!(module) as number, `${this.name} module unload`);
  }

  getFunction(module: Handle, name: string): Handle {
    this.guard();
    this.moduleCheck(this.modules!.fns.ModuleGetFunction!(this.outM, module, name) as number, `${this.name} get function ${name}`);
    return this.outM[0]!;
  }

  launch(fn: Handle, c: LaunchConfig, packed: unknown): void {
    this.guard();
    const m = this.modules!;
    const status = m.fns[m.launch]!(fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.sharedBytes, c.stream, packed, null) as number;
    if (status !== 0) this.moduleCheck(status, `${this.name} kernel launch`);
  }

  packArgs(args: readonly KernelArg[]): unknown {
    return packKernelArgs(args);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.hostCallbacks.dispose();
  }
}
