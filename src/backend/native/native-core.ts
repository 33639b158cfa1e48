/**
 * The first half of what the CUDA and HIP backends share: the runtime's status codes as typed errors, the current
 * device, device facts, and memory (device, pinned, managed, copies, fills). native-backend.ts adds streams, events,
 * graphs, peers and kernels on top.
 */
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import type {
  Address,
  BatchOutcome,
  CoherencyMode,
  BackendCapabilities,
  BackendName,
  CopyKind,
  DeviceInfo,
  DeviceMallocFlags,
  DeviceMemoryUse,
  Handle,
  HostCopier,
  LibraryRecord,
  MemAdvice,
  MemLocation,
  NativeCopyBatch,
  PinnedFlags,
  VirtualMemoryApi,
} from '../backend.js';
import { BatchCaller } from './batch-call.js';
import { addressOf, cString, viewOf, type NativeFn } from './ffi.js';
import { HostCallbacks } from './host-callbacks.js';
import { ThreadedHostCopier } from './host-copier.js';
import { errorForStatus, StatusNames } from './status.js';
import { mapOnNode, unmapNodeMemory } from './numa-memory.js';
import { nativeVmm } from './vmm.js';
import type { RtcCompiler } from './rtc.js';
import { dropUndefined } from '../device-info.js';
import { pciFacts } from '../sysfs.js';
import { RUNTIME_FLAGS, type StatusTable } from './runtime-api.js';
import { ADVICE, type DeviceAttributeIds, type NativeParts } from './native-parts.js';

/** cudaMemcpyDefault / hipMemcpyDefault: the direction from the addresses (unified addressing). */
const COPY_DEFAULT = 4;

/** Errors, devices and memory of a native backend; {@link NativeBackend} completes it. */
export abstract class NativeCore {
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
  protected readonly hostCallbacks = new HostCallbacks();
  protected readonly outP: number[] = [0];
  protected readonly outA: number[] = [0];
  protected readonly outB: number[] = [0];
  protected readonly outF: number[] = [0];
  protected readonly pools = new Map<number, number>();
  protected disposed = false;
  protected readonly modules: NativeParts['modules'];
  protected readonly rtc: RtcCompiler | undefined;
  protected readonly archs = new Map<number, string>();
  protected readonly outM: number[] = [0];
  private readonly attrs: DeviceAttributeIds;
  /** The batch copy, called as this release takes it. */
  private readonly batch: BatchCaller | undefined;
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
    this.batch =
      parts.batch && parts.fns.MemcpyBatchAsync
        ? new BatchCaller(parts.fns.MemcpyBatchAsync, parts.batch, {
            name: this.name,
            fail: (status, call) => this.fail(status, call),
            copy: (dst, src, bytes, stream) => this.check(this.fn.MemcpyAsync!(dst, src, bytes, COPY_DEFAULT, stream) as number, `${this.name}MemcpyAsync`),
          })
        : undefined;
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

  protected callAsync(f: NativeFn, args: unknown[], call: string): Promise<void> {
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

  /** Called before module loads and physical allocations: make the device's context current. */
  protected prepareContext(device: number): void {
    this.use(device);
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
    if (flags.numaNode !== undefined) return this.hostAllocNuma(bytes, flags.numaNode, flags);
    return this.hostAllocPlain(bytes, flags);
  }

  /** Pinned memory with the vendor's flags, through the runtime. */
  protected hostAllocPlain(bytes: number, flags: PinnedFlags): Address {
    try {
      this.check(this.hostAllocStatus(this.outP, bytes, flags), `${this.name} pinned host allocation (${bytes})`);
    } catch (e) {
      throw this.oom(e, undefined, bytes, 'pinned host allocation');
    }
    return this.outP[0]!;
  }

  /** Pinned memory on NUMA node `node`: by default an mbind-bound mapping, page-locked with hostRegister. */
  protected hostAllocNuma(bytes: number, node: number, flags: PinnedFlags): Address {
    return this.hostAllocOnNode(bytes, node, flags);
  }

  /** Pinned memory on one NUMA node: an mbind-bound mapping, page-locked with hostRegister. */
  protected hostAllocOnNode(bytes: number, node: number, flags: PinnedFlags): Address {
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

  /** The user-data pointer host functions are launched with (null; HIP gives a word of its own). */
  protected hostFnUserData(): Buffer | null {
    return null;
  }

  /** How a range is kept coherent; only HIP can tell (hipMemRangeGetAttribute). */
  coherencyMode(_address: Address, _bytes: number): CoherencyMode | undefined {
    return undefined;
  }

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

  memcpyBatchAsync(batch: NativeCopyBatch, stream: Handle): BatchOutcome {
    this.guard();
    return this.batch!.run(batch, stream);
  }

  createHostCopier(threads: number): HostCopier {
    this.guard();
    return new ThreadedHostCopier(threads);
  }
}
