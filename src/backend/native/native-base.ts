/**
 * The base of what the CUDA and HIP backends share: the runtime's status codes as typed errors (out-of-memory ones with
 * the device's free and total bytes), the current device, and device facts. native-core.ts adds memory (device,
 * pinned, managed, copies, fills) on top, native-backend.ts streams, events, graphs, peers and kernels.
 */
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import type { BackendCapabilities, BackendName, DeviceInfo, DeviceMemoryUse, LibraryRecord, VirtualMemoryApi } from '../backend.js';
import { type NativeFn, cString } from './ffi.js';
import { HostCallbacks } from './host-callbacks.js';
import { errorForStatus, StatusNames } from './status.js';
import { nativeVmm } from './vmm.js';
import type { RtcCompiler } from './rtc.js';
import { dropUndefined } from '../device-info.js';
import { pciFacts } from '../sysfs.js';
import type { StatusTable } from './runtime-api.js';
import type { DeviceAttributeIds, NativeParts } from './native-parts.js';

/** Errors and devices of a native backend; {@link NativeCore} adds memory. */
export abstract class NativeBase {
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
    const waiting = this.hostCallbacks.waiting;
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
}
