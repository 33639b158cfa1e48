/**
 * The core of a runtime: a backend and its devices, typed allocations, copies and fills, streams and events, and the
 * registry of live allocations. Every argument is checked here, before the backend sees it. The layers above
 * (pool/, transfer/, collectives/) type against this class; the facade that adds transfers, batches, graphs and
 * pipelines, and `openRuntime()`, is `Runtime` in runtime/runtime.ts.
 */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError, OutOfMemoryError } from '../errors.js';
import type { Backend, DeviceInfo, MemLocation } from '../backend/backend.js';
import type { BackendSelection } from '../backend/select.js';
import { Device } from './device.js';
import { numaNodes } from '../backend/sysfs.js';
import { GpuEvent, type EventOwner } from '../stream/event.js';
import { Stream, type StreamOwner } from '../stream/stream.js';
import type { KernelOwner, PointerArg } from '../kernels/module.js';
import {
  Allocation,
  vouch,
  MappedAllocation,
  PageableAllocation,
  PinnedAllocation,
  type AllocationOwner,
  type ManagedTarget,
  type MemoryKind,
  type PinnedOptions,
} from './allocation.js';
import { planCopy, planFill, type CopyDirection, type CopyOptions, type FillOptions, type MemoryRef, type PlannedCopy } from './copy.js';
import { AllocationRegistry } from './registry.js';
import { describeValue, isJsBuffer } from './describe.js';
import { checkInteger, checkSize } from './validate.js';

export type { CopyOptions, FillOptions, MemoryRef, CopyDirection };

/** A copy checked once, to enqueue many times. */
export interface PreparedCopy {
  readonly bytes: number;
  readonly direction: CopyDirection;
  /** Enqueues the copy on `stream` (or the stream it was prepared with; synchronous without one). */
  run(stream?: Stream): void;
}

export interface PageableAllocOptions {
  /** Page-lock the memory in place with hostRegister. */
  register?: boolean;
  /** With register: map it for device access too. */
  mapped?: boolean;
}

/** Counts of live allocations per kind. */
export type LiveMemory = Record<MemoryKind, { count: number; bytes: number }>;

/**
 * A backend and its devices. Disposing it frees every allocation, stream and event still live, after whatever the
 * layers above registered as dependents (stagers, graphs).
 */
export class MemoryRuntime implements AllocationOwner, StreamOwner, EventOwner, KernelOwner, Disposable {
  readonly backend: Backend;
  readonly selection: BackendSelection;
  readonly devices: readonly Device[];
  /** @internal Peer access enabled through this runtime, as "device:peer". */
  readonly peers = new Set<string>();
  private readonly registry = new AllocationRegistry();
  /** @internal */
  readonly events = new Set<GpuEvent>();
  private open = true;
  private readonly deviceFacts = new Map<number, DeviceInfo>();
  /** What the layers above made on this runtime (stagers, graphs): disposed first, newest first. */
  private readonly dependents = new Set<Disposable>();
  /** @internal Streams being captured right now. */
  capturing = 0;

  constructor(selection: BackendSelection) {
    this.selection = selection;
    this.backend = selection.backend;
    const n = this.backend.deviceCount();
    this.devices = Array.from({ length: n }, (_, i) => new Device(this, i));
  }

  /** @throws DisposedError when the runtime was disposed. */
  assertOpen(): void {
    if (!this.open) throw new DisposedError('the runtime was disposed');
  }

  /**
   * The device with this index.
   * @throws InvalidArgumentError when there is no such device.
   */
  device(index: number): Device {
    this.assertOpen();
    const d = typeof index === 'number' && Number.isInteger(index) ? this.devices[index] : undefined;
    if (!d) {
      const why =
        this.devices.length === 0
          ? `the ${this.backend.name} backend has no device${this.backend.noDeviceReason() ? ` (${this.backend.noDeviceReason()})` : ''}`
          : `devices are 0 to ${this.devices.length - 1}`;
      throw new InvalidArgumentError(`no device ${String(index)}: ${why}`, ErrorCode.INVALID_ARGUMENT);
    }
    return d;
  }

  /**
   * Allocates pinned (page-locked) host memory. `writeCombined` suits host-to-device staging the host only writes.
   * @throws InvalidArgumentError, UNSUPPORTED (AMD options elsewhere), OutOfMemoryError
   */
  allocPinned(bytes: number, options: PinnedOptions & { mapped?: boolean } = {}): PinnedAllocation {
    this.assertOpen();
    checkSize(bytes, 'pinned allocation');
    const caps = this.backend.capabilities;
    if (options.writeCombined && !caps.writeCombined) throw this.unsupported('write-combined pinned memory');
    if (options.coherent !== undefined && !caps.coherentHostMemory) throw this.unsupported('coherent / non-coherent pinned memory (hipHostMallocCoherent)');
    if (options.numaUser && !caps.numaHostMemory) throw this.unsupported('NUMA-placed pinned memory (hipHostMallocNumaUser)');
    if (options.numaNode !== undefined) {
      const nodes = numaNodes();
      checkInteger(options.numaNode, 'numaNode', 0, 1023);
      if (nodes.length > 0 && !nodes.includes(options.numaNode))
        throw new InvalidArgumentError(`numaNode ${options.numaNode}: this machine's NUMA nodes are ${nodes.join(', ')}`);
    }
    if (options.mapped) return this.allocMapped(bytes, options);
    const device = this.device(0).index;
    const address = this.backend.hostAlloc(device, bytes, { ...options, portable: options.portable ?? true });
    let deviceAddress: number | undefined;
    try {
      // Under unified addressing every pinned allocation is reachable from the devices at this address.
      deviceAddress = this.backend.hostDevicePointer(address);
    } catch {
      deviceAddress = undefined;
    }
    return this.adopt(new PinnedAllocation(this, 'pinned', address, bytes, deviceAddress, { ...options }));
  }

  /**
   * Allocates zero-copy memory: pinned host memory mapped into the devices' address space.
   * @throws InvalidArgumentError, UNSUPPORTED, OutOfMemoryError
   */
  allocMapped(bytes: number, options: PinnedOptions = {}): MappedAllocation {
    this.assertOpen();
    checkSize(bytes, 'mapped allocation');
    if (!this.backend.capabilities.mappedMemory) throw this.unsupported('mapped (zero-copy) memory');
    this.device(0);
    const address = this.backend.hostAlloc(0, bytes, { ...options, portable: options.portable ?? true, mapped: true });
    const deviceAddress = this.backend.hostDevicePointer(address);
    return this.adopt(new MappedAllocation(this, address, bytes, deviceAddress, { ...options }));
  }

  /**
   * Ordinary JS memory (an ArrayBuffer of `bytes`, or the buffer given), optionally page-locked in place.
   * @throws InvalidArgumentError, UNSUPPORTED
   */
  allocPageable(bytesOrBuffer: number | ArrayBuffer, options: PageableAllocOptions = {}): PageableAllocation {
    this.assertOpen();
    const buffer = typeof bytesOrBuffer === 'number' ? new ArrayBuffer(checkSize(bytesOrBuffer, 'pageable allocation', { max: 2 ** 32 * 64 })) : bytesOrBuffer;
    if (!(buffer instanceof ArrayBuffer)) throw new InvalidArgumentError('allocPageable: expected a size or an ArrayBuffer');
    checkSize(buffer.byteLength, 'pageable allocation');
    if (options.register && !this.backend.capabilities.hostRegister) throw this.unsupported('hostRegister');
    const address = this.backend.adoptHostBuffer(buffer);
    let deviceAddress: number | undefined;
    if (options.register) {
      try {
        this.backend.hostRegister(address, buffer.byteLength, options.mapped ?? true);
        deviceAddress = this.backend.hostDevicePointer(address);
      } catch (e) {
        this.backend.releaseHostBuffer(address);
        throw e;
      }
    }
    return this.adopt(new PageableAllocation(this, buffer, address, deviceAddress, !!options.register));
  }

  /**
   * Copies between any two kinds of memory. With `stream` the copy is enqueued and this returns at once (keep both
   * allocations alive until the stream has passed it); without, it is done when this returns.
   * @returns the direction the copy took.
   * @throws InvalidArgumentError (size, bounds, foreign address, wrong device), DisposedError
   */
  copy(dst: MemoryRef, src: MemoryRef, options: CopyOptions = {}): CopyDirection {
    const p = this.planCopy(dst, src, options);
    this.runCopy(p, options.stream);
    return p.direction;
  }

  /**
   * Checks a copy once and answers a function that enqueues it on `stream` (default: the stream in `options`)
   * with one native call. Each run re-checks only that both allocations and the stream are still live: for loops
   * that repeat the same copy (pipelines, timing).
   * @throws as copy
   */
  prepareCopy(dst: MemoryRef, src: MemoryRef, options: CopyOptions = {}): PreparedCopy {
    const p = this.planCopy(dst, src, options);
    const fixed = options.stream;
    return {
      bytes: p.bytes,
      direction: p.direction,
      run: (stream?: Stream): void => {
        const s = stream ?? fixed;
        if (s !== fixed && s) this.checkStream(s);
        p.dst.assertLive('copy destination');
        p.src.assertLive('copy source');
        this.runCopy(p, s);
      },
    };
  }

  private planCopy(dst: MemoryRef, src: MemoryRef, options: CopyOptions): PlannedCopy {
    this.assertOpen();
    const d = this.resolve(dst, 'copy destination');
    const s = this.resolve(src, 'copy source');
    if (options.stream) this.checkStream(options.stream);
    return planCopy(d.allocation, d.offset, s.allocation, s.offset, options);
  }

  private runCopy(p: PlannedCopy, stream: Stream | undefined): void {
    if (stream) stream.assertLive('copy');
    else this.assertNotCapturing('copy');
    if (p.direction === 'PtoP') {
      this.backend.memcpyPeerAsync(p.dstAddress, p.dst.device!, p.srcAddress, p.src.device!, p.bytes, stream?.handle ?? 0);
      if (!stream) this.backend.synchronizeStream(0, p.src.device);
    } else if (stream) {
      this.backend.memcpyAsync(p.dstAddress, p.srcAddress, p.bytes, p.kind, stream.handle);
    } else {
      this.backend.memcpy(p.dstAddress, p.srcAddress, p.bytes, p.kind);
    }
  }

  /** Refuses a call that would wait for the device while a stream is captured (ThreadLocal capture forbids it). */
  private assertNotCapturing(what: string): void {
    if (this.capturing > 0) {
      throw new GpuError(
        ErrorCode.INVALID_STATE,
        `${what} without a stream waits for the device, which is not allowed while a stream is captured: pass the captured stream`,
      );
    }
  }

  /**
   * Sets bytes to `value` (0 to 255). Pageable memory is filled by the host: at once, or, with a stream, in a
   * blocking host callback ordered in that stream.
   * @throws InvalidArgumentError, DisposedError
   */
  fill(dst: MemoryRef, value: number, options: FillOptions = {}): void {
    this.assertOpen();
    const d = this.resolve(dst, 'fill');
    if (options.stream) this.checkStream(options.stream);
    if (!options.stream) this.assertNotCapturing('fill');
    const f = planFill(d.allocation, d.offset, value, options);
    const a = d.allocation;
    if (a.kind === 'pageable') {
      const fillNow = (): void => void a.view(f.offset, f.bytes).fill(value);
      if (options.stream) void options.stream.onHost(fillNow, { blocking: true });
      else fillNow();
      return;
    }
    if (options.stream) {
      this.backend.memsetAsync(f.address, value, f.bytes, options.stream.handle);
    } else {
      // The default stream of the memory's own device (another device's cannot reach it).
      this.backend.memsetAsync(f.address, value, f.bytes, 0, a.device);
      this.backend.synchronizeStream(0, a.device);
    }
  }

  /**
   * The live allocation containing a raw address, and the offset in it.
   * @throws InvalidArgumentError (FOREIGN_ADDRESS) when no live allocation of this runtime contains it; INVALID_ARGUMENT
   *   for anything but an allocation or a number (a JS buffer: the message says to use rt.upload / rt.download).
   */
  resolve(ref: MemoryRef, what = 'address'): { allocation: Allocation; offset: number } {
    if (ref instanceof Allocation) {
      ref.assertLive(what);
      if (ref.owner.backend !== this.backend) throw new InvalidArgumentError(`${what}: the allocation belongs to another runtime`, ErrorCode.FOREIGN_ADDRESS);
      return { allocation: ref, offset: 0 };
    }
    if (typeof ref !== 'number') {
      const fix = isJsBuffer(ref) ? ': a JS buffer moves to and from device memory with rt.upload / rt.download' : '';
      throw new InvalidArgumentError(`${what}: expected an allocation or an address, got ${describeValue(ref)}${fix}`);
    }
    if (!Number.isInteger(ref) || ref < 0) throw new InvalidArgumentError(`${what}: ${ref} is not an address`, ErrorCode.FOREIGN_ADDRESS);
    const found = this.registry.find(ref);
    if (!found) throw new InvalidArgumentError(`${what}: 0x${ref.toString(16)} is not inside any live allocation of this runtime`, ErrorCode.FOREIGN_ADDRESS);
    return found;
  }

  /** Live allocations by kind. */
  liveMemory(): LiveMemory {
    const out = Object.fromEntries(['device', 'pinned', 'mapped', 'managed', 'pageable'].map((k) => [k, { count: 0, bytes: 0 }])) as LiveMemory;
    for (const a of this.registry.all()) {
      out[a.kind].count++;
      out[a.kind].bytes += a.bytes;
    }
    return out;
  }

  /**
   * The host NUMA node of `device`, where the machine has several nodes and the device reports one; undefined
   * otherwise (one node: every placement is local).
   */
  numaNodeFor(device: number): number | undefined {
    return numaNodes().length < 2 ? undefined : this.fact(device, 'numaNode');
  }

  /** True once the runtime was disposed. */
  get disposed(): boolean {
    return !this.open;
  }

  /** Frees everything still live and releases the backend. A second call does nothing. */
  [Symbol.dispose](): void {
    if (!this.open) return;
    // Dependents first (stagers, graphs): their threads and streams stop before the memory they use is freed.
    for (const d of [...this.dependents].reverse()) d[Symbol.dispose]();
    this.dependents.clear();
    for (const a of this.registry.all()) {
      try {
        a.forceFree();
      } catch {
        a.invalidate();
      }
    }
    for (const e of this.events) e[Symbol.dispose]();
    for (const d of this.devices) d.close();
    this.open = false;
    this.backend.dispose();
  }

  // ---- internal -----------------------------------------------------------------------------------------

  /** @internal */
  adopt<T extends Allocation>(a: T): T {
    vouch(a);
    this.registry.add(a);
    if (a.deviceAddress !== undefined && a.deviceAddress !== a.address) this.registry.add(a, a.deviceAddress);
    return a;
  }

  /** @internal Something of a layer above, disposed before the memory when the runtime is. */
  adoptDependent(d: Disposable): void {
    this.dependents.add(d);
  }

  /** @internal */
  forgetDependent(d: Disposable): void {
    this.dependents.delete(d);
  }

  /** @internal */
  forget(a: Allocation): void {
    this.registry.delete(a);
  }

  /** @internal */
  forgetStream(s: Stream): void {
    this.devices[s.device]?.forgetStream(s);
  }

  /** @internal */
  forgetEvent(e: GpuEvent): void {
    this.events.delete(e);
  }

  /** @internal */
  internalEvent(device: number): GpuEvent {
    return new GpuEvent(this, device, this.backend.createEvent(device, { timing: false }), false);
  }

  /** @internal */
  defaultStream(device: number): Stream {
    return this.device(device).defaultStream;
  }

  /** @internal */
  unsupported(what: string): InvalidArgumentError {
    return new InvalidArgumentError(`${what} is not supported by the ${this.backend.name} backend`, ErrorCode.UNSUPPORTED, { backend: this.backend.name });
  }

  /** @internal Refuses a device allocation larger than the whole device, without a native call. */
  checkFits(device: number, bytes: number, what: string): void {
    let total = this.deviceFacts.get(device)?.totalBytes;
    if (total === undefined) {
      total = this.backend.memGetInfo(device).totalBytes;
      this.deviceFacts.set(device, { ...this.deviceFacts.get(device), index: device, totalBytes: total });
    }
    if (bytes > total) {
      const details = { requestedBytes: bytes, device, totalBytes: total };
      throw new OutOfMemoryError(`out of memory: ${what} of ${bytes} bytes is larger than device ${device}'s ${total} bytes`, details, {
        backend: this.backend.name,
      });
    }
  }

  /** @internal */
  checkStream(stream: Stream): void {
    if (!(stream instanceof Stream)) throw new InvalidArgumentError('stream: expected a Stream');
    stream.assertLive('stream');
    if (stream.owner !== this) throw new InvalidArgumentError('stream: the stream belongs to another runtime', ErrorCode.FOREIGN_ADDRESS);
  }

  /** @internal The native handle of a stream argument (the default stream when none). */
  streamHandle(stream: unknown, device: number): number {
    if (stream === undefined) return 0;
    this.checkStream(stream as Stream);
    const s = stream as Stream;
    if (s.device !== device) throw new InvalidArgumentError(`the stream belongs to device ${s.device}, not ${device}`, ErrorCode.WRONG_DEVICE);
    return s.handle;
  }

  /** @internal */
  location(target: ManagedTarget): MemLocation {
    if (target === 'host') return { type: 'host' };
    return { type: 'device', device: this.device(target).index };
  }

  /** @internal */
  devicePointer(arg: PointerArg, device: number, what: string): number {
    const a = arg instanceof Allocation ? arg : arg?.allocation;
    if (!(a instanceof Allocation)) throw new InvalidArgumentError(`${what}: expected an allocation`);
    const offset = arg instanceof Allocation ? 0 : arg.offset;
    this.resolve(a, what);
    if (!Number.isInteger(offset) || offset < 0 || offset > a.bytes) {
      throw new InvalidArgumentError(`${what}: offset ${offset} is outside the ${a.bytes}-byte allocation`, ErrorCode.OUT_OF_BOUNDS);
    }
    if (a.kind === 'device' && a.device !== device && !this.peers.has(`${device}:${a.device}`)) {
      throw new InvalidArgumentError(
        `${what}: memory of device ${a.device} used by a kernel on device ${device}; enable peer access first`,
        ErrorCode.WRONG_DEVICE,
      );
    }
    let base = a.deviceAddress;
    if (base === undefined && a.kind === 'pageable' && this.fact(device, 'pageableMemoryAccess') === true) base = a.address;
    if (base === undefined) {
      throw new InvalidArgumentError(
        `${what}: ${a.kind} memory is not reachable from device ${device} (register it, or use pinned or mapped memory)`,
        ErrorCode.INVALID_ARGUMENT,
      );
    }
    return base + offset;
  }

  /** A fact of the device's info, read from the backend once. */
  private fact<K extends keyof DeviceInfo>(device: number, key: K): DeviceInfo[K] {
    let info = this.deviceFacts.get(device);
    if (info?.[key] === undefined) {
      info = { ...info, ...this.backend.deviceInfo(device) };
      this.deviceFacts.set(device, info);
    }
    return info[key];
  }
}
