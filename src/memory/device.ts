/** One device of a runtime: its facts and memory, device and managed allocations, streams, events, peers, kernels. */
import { OutOfMemoryError } from '../errors.js';
import type { DeviceInfo, DeviceMemoryUse, KernelSource } from '../backend/backend.js';
import { GpuEvent, type EventCreateOptions } from '../stream/event.js';
import { Stream, type StreamCreateOptions } from '../stream/stream.js';
import { KernelModule } from '../kernels/module.js';
import { DeviceAllocation, ManagedAllocation } from './allocation.js';
import type { MemoryRuntime as Runtime } from './runtime.js';
import { checkInteger, checkSize } from './validate.js';

/** Options of device memory. AMD only; refused with UNSUPPORTED elsewhere. */
export interface DeviceAllocOptions {
  fineGrained?: boolean;
  uncached?: boolean;
}

export interface ManagedAllocOptions {
  /** 'global' (default): any stream may use it; 'host': only the host until a stream attaches it. */
  attach?: 'global' | 'host';
}

/** One device of a runtime. */
export class Device {
  private readonly streams = new Set<Stream>();
  private readonly modules = new Map<string, KernelModule>();
  readonly defaultStream: Stream;

  constructor(
    private readonly rt: Runtime,
    readonly index: number,
  ) {
    this.defaultStream = new Stream(rt, index, 0, 0, false);
  }

  /** The runtime this device belongs to. */
  get runtime(): Runtime {
    return this.rt;
  }

  /** Facts about the device, read now (free memory changes). */
  info(): DeviceInfo {
    this.rt.assertOpen();
    return this.rt.backend.deviceInfo(this.index);
  }

  /** Free and total device memory in bytes. */
  memGetInfo(): { freeBytes: number; totalBytes: number } {
    this.rt.assertOpen();
    return this.rt.backend.memGetInfo(this.index);
  }

  /**
   * The device's memory as a monitor sees it: total, free and used bytes and, where the backend can list them, the
   * processes holding memory. On CUDA through NVML (no context is created); elsewhere through memGetInfo.
   */
  memoryUse(): DeviceMemoryUse {
    this.rt.assertOpen();
    return this.rt.backend.memoryUse(this.index);
  }

  /**
   * Allocates device memory.
   * @throws InvalidArgumentError for a bad size, UNSUPPORTED for AMD-only options elsewhere; OutOfMemoryError
   */
  alloc(bytes: number, options: DeviceAllocOptions = {}): DeviceAllocation {
    this.rt.assertOpen();
    checkSize(bytes, 'device allocation');
    const caps = this.rt.backend.capabilities;
    if (options.fineGrained && !caps.fineGrainedDeviceMemory) throw this.rt.unsupported('fine-grained device memory (hipExtMallocWithFlags)');
    if (options.uncached && !caps.uncachedDeviceMemory) throw this.rt.unsupported('uncached device memory (hipDeviceMallocUncached)');
    this.rt.checkFits(this.index, bytes, 'device allocation');
    const address = this.rt.backend.malloc(this.index, bytes, options);
    return this.rt.adopt(new DeviceAllocation(this.rt, address, bytes, this.index, { ...options }));
  }

  /**
   * Allocates managed memory. Never more than the device has free (asking for more can hang some GPUs).
   * @throws InvalidArgumentError, UNSUPPORTED, OutOfMemoryError
   */
  allocManaged(bytes: number, options: ManagedAllocOptions = {}): ManagedAllocation {
    this.rt.assertOpen();
    checkSize(bytes, 'managed allocation');
    if (!this.rt.backend.capabilities.managedMemory) throw this.rt.unsupported('managed memory');
    const { freeBytes, totalBytes } = this.memGetInfo();
    if (bytes > freeBytes) {
      throw new OutOfMemoryError(
        `out of memory: managed allocation of ${bytes} bytes exceeds device ${this.index}'s free memory (${freeBytes} of ${totalBytes} bytes)`,
        { requestedBytes: bytes, device: this.index, freeBytes, totalBytes },
        { backend: this.rt.backend.name },
      );
    }
    const attach = options.attach ?? 'global';
    const address = this.rt.backend.mallocManaged(this.index, bytes, attach === 'host');
    return this.rt.adopt(
      new ManagedAllocation(
        this.rt,
        address,
        bytes,
        this.index,
        attach,
        (t) => this.rt.location(t),
        (s) => this.rt.streamHandle(s, this.index),
      ),
    );
  }

  /** Creates a stream on this device. */
  createStream(options: StreamCreateOptions = {}): Stream {
    this.rt.assertOpen();
    const priority = options.priority ?? 0;
    checkInteger(priority, 'stream priority', -1000, 1000);
    const handle = this.rt.backend.createStream(this.index, { priority, nonBlocking: options.nonBlocking ?? false });
    const s = new Stream(this.rt, this.index, handle, priority, options.nonBlocking ?? false);
    this.streams.add(s);
    return s;
  }

  /** Creates an event on this device (timing by default). */
  createEvent(options: EventCreateOptions = {}): GpuEvent {
    this.rt.assertOpen();
    const timing = options.timing ?? true;
    const e = new GpuEvent(this.rt, this.index, this.rt.backend.createEvent(this.index, { timing, blockingSync: options.blockingSync ?? false }), timing);
    this.rt.events.add(e);
    return e;
  }

  /** True when this device can read and write `peer`'s memory directly. */
  canAccessPeer(peer: Device | number): boolean {
    const p = this.rt.device(typeof peer === 'number' ? peer : peer.index);
    if (p.index === this.index) return false;
    return this.rt.backend.canAccessPeer(this.index, p.index);
  }

  /** Lets kernels on this device use `peer`'s memory. Enabling twice is harmless. */
  enablePeerAccess(peer: Device | number): void {
    const p = this.rt.device(typeof peer === 'number' ? peer : peer.index);
    if (!this.canAccessPeer(p)) throw this.rt.unsupported(`peer access from device ${this.index} to device ${p.index}`);
    this.rt.backend.enablePeerAccess(this.index, p.index);
    this.rt.peers.add(`${this.index}:${p.index}`);
  }

  disablePeerAccess(peer: Device | number): void {
    const p = this.rt.device(typeof peer === 'number' ? peer : peer.index);
    this.rt.backend.disablePeerAccess(this.index, p.index);
    this.rt.peers.delete(`${this.index}:${p.index}`);
  }

  /** Resolves when all work on this device's streams has completed. Never blocks the event loop. */
  async synchronize(): Promise<void> {
    this.rt.assertOpen();
    await Promise.all([...this.streams].filter((s) => !s.disposed).map((s) => s.synchronize()));
    await this.defaultStream.synchronize();
  }

  /**
   * Compiles (or reads from the disk cache) and loads a kernel source on this device; loaded once per runtime.
   * @throws GpuError COMPILE_FAILED, UNSUPPORTED when the backend has no compiler
   */
  loadModule(source: KernelSource): KernelModule {
    this.rt.assertOpen();
    const cached = this.modules.get(source.name);
    if (cached) return cached;
    const compiled = this.rt.backend.compile(this.index, source);
    const handle = this.rt.backend.loadModule(this.index, source, compiled);
    const m = new KernelModule(this.rt, this.index, source, handle, { cached: compiled.cached, compileMs: compiled.compileMs });
    this.modules.set(source.name, m);
    return m;
  }

  /** @internal */
  forgetStream(s: Stream): void {
    this.streams.delete(s);
  }

  /** @internal Destroys what the device still holds. */
  close(): void {
    for (const s of this.streams) s[Symbol.dispose]();
    for (const m of this.modules.values()) m[Symbol.dispose]();
    this.modules.clear();
  }
}
