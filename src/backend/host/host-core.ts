/**
 * The host backend's state, devices and memory: "device" memory is host memory counted against a capacity, copies run
 * when their stream reaches them. host-backend.ts adds streams, events, graphs, peers, kernels and the factory.
 */
import { readFileSync } from 'node:fs';
import { cpus, hostname, totalmem } from 'node:os';
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import type {
  Address,
  DeviceMemoryUse,
  BackendCapabilities,
  CopyKind,
  DeviceInfo,
  Handle,
  HostKernel,
  HostMemoryResolver,
  KernelSource,
  LibraryRecord,
  MemLocation,
  MemPoolOptions,
  VirtualMemoryApi,
} from '../backend.js';
import { HostAddressSpace, type HostRegion } from './address-space.js';
import { HostQueue, HostScheduler, type HostEventState } from './host-queues.js';

export const CAPABILITIES: BackendCapabilities = {
  managedMemory: true,
  mappedMemory: true,
  hostRegister: true,
  writeCombined: true,
  streamOrderedAllocator: true,
  virtualMemory: false,
  peerAccess: true,
  kernels: true,
  blockingHostCallbacks: true,
  fineGrainedDeviceMemory: false,
  uncachedDeviceMemory: false,
  coherentHostMemory: false,
  numaHostMemory: false,
  coherencyControl: false,
  batchCopies: true,
  graphs: true,
  hostCopierThreads: false,
  gpuDirectStorage: false,
  gpuMemory: false,
  vendorCollectives: false,
};

export function hostError(status: string, message: string): GpuError {
  return new GpuError(ErrorCode.NATIVE, `host: ${message}`, { backend: 'host', statusName: status });
}

/** The host backend's devices, memory and copies; {@link HostBackend} completes it. */
export abstract class HostCore {
  readonly name = 'host' as const;
  readonly capabilities = Object.freeze({ ...CAPABILITIES });
  readonly runtimeVersion = `node ${process.versions.node}`;
  readonly driverVersion = undefined;
  readonly libraries: readonly LibraryRecord[] = [];
  readonly vmm: VirtualMemoryApi | undefined = undefined;

  protected readonly space = new HostAddressSpace();
  protected readonly scheduler = new HostScheduler();
  protected readonly used: number[];
  protected readonly streams = new Map<Handle, HostQueue>();
  protected readonly events = new Map<Handle, HostEventState>();
  protected readonly modules = new Map<Handle, KernelSource>();
  protected readonly functions = new Map<Handle, { kernel: HostKernel; name: string }>();
  protected readonly peers = new Set<string>();
  protected nextHandle = 1;
  /** Streams being captured, and the work recorded on each (replayed on the launch stream). */
  protected readonly capturing = new Map<Handle, Array<(stream: Handle) => void>>();
  protected readonly graphs = new Map<Handle, Array<(stream: Handle) => void>>();
  protected readonly execs = new Map<Handle, Array<(stream: Handle) => void>>();
  protected unusable: string | undefined;
  protected disposed = false;
  protected readonly mem: HostMemoryResolver;

  constructor(
    private readonly devices: number,
    private readonly capacity: number,
  ) {
    this.used = new Array<number>(devices).fill(0);
    // Handle 0 is the default ("null") stream; the host has one for all devices.
    const nullStream = new HostQueue(0);
    this.streams.set(0, nullStream);
    this.scheduler.add(nullStream);
    this.scheduler.onError = (e) => {
      this.unusable = `a kernel or host callback failed: ${(e as Error).message}`;
    };
    this.mem = {
      bytes: (address, bytes) => {
        const r = this.space.containing(address, bytes);
        if (!r) throw new Error(`illegal address: ${bytes} bytes at 0x${address.toString(16)} are not inside one allocation`);
        return new Uint8Array(r.buffer, address - r.address, bytes);
      },
    };
  }

  get unusableReason(): string | undefined {
    return this.unusable;
  }

  protected guard(): void {
    if (this.unusable !== undefined) {
      throw new GpuError(ErrorCode.DEVICE_UNUSABLE, `the host backend is unusable after an earlier error: ${this.unusable}`, { backend: 'host' });
    }
    if (this.disposed) throw new GpuError(ErrorCode.DISPOSED, 'the host backend was disposed', { backend: 'host' });
  }

  deviceCount(): number {
    return this.devices;
  }

  noDeviceReason(): string | undefined {
    return undefined;
  }

  deviceInfo(device: number): DeviceInfo {
    this.guard();
    const cpu = cpus();
    return {
      index: device,
      name: `host CPU${cpu[0] ? ` (${cpu[0].model.trim()})` : ''}`,
      arch: process.arch,
      totalBytes: this.capacity,
      freeBytes: this.capacity - this.used[device]!,
      memorySource: hostMemorySource(this.capacity),
      multiprocessors: cpu.length,
      asyncEngines: 0,
      managedMemory: true,
      concurrentManagedAccess: true,
      pageableMemoryAccess: true,
      integrated: true,
      canMapHostMemory: true,
    };
  }

  memGetInfo(device: number): { freeBytes: number; totalBytes: number } {
    this.guard();
    return { freeBytes: this.capacity - this.used[device]!, totalBytes: this.capacity };
  }

  /** The logical device's capacity and what this process holds on it (the only process a host device has). */
  memoryUse(device: number): DeviceMemoryUse {
    const { freeBytes, totalBytes } = this.memGetInfo(device);
    const used = totalBytes - freeBytes;
    return {
      name: this.deviceInfo(device).name,
      totalBytes,
      freeBytes,
      usedBytes: used,
      processes: [{ pid: process.pid, usedBytes: used }],
      source: 'host',
      uuid: `host-${machineId()}-${device}`,
    };
  }

  synchronizeDevice(_device: number): void {
    this.guard();
    this.scheduler.drain();
    this.guard();
  }

  // ---- memory ---------------------------------------------------------------------------------------------

  protected allocate(bytes: number, kind: HostRegion['kind'], device: number | undefined): Address {
    this.guard();
    if (device !== undefined && this.used[device]! + bytes > this.capacity) {
      const freeBytes = this.capacity - this.used[device]!;
      throw new OutOfMemoryError(
        `out of memory: ${kind} allocation of ${bytes} bytes on host device ${device} (${freeBytes} bytes free of ${this.capacity})`,
        { requestedBytes: bytes, device, freeBytes, totalBytes: this.capacity },
        { backend: 'host', statusName: 'hostErrorMemoryAllocation' },
      );
    }
    let buffer: ArrayBuffer;
    try {
      buffer = new ArrayBuffer(bytes);
    } catch (e) {
      throw new OutOfMemoryError(`out of memory: the JS heap refused ${bytes} bytes`, { requestedBytes: bytes, device }, { backend: 'host', cause: e });
    }
    if (device !== undefined) this.used[device]! += bytes;
    return this.space.add(buffer, bytes, kind, device).address;
  }

  protected release(address: Address, kinds: readonly HostRegion['kind'][]): void {
    this.guard();
    const r = this.space.at(address);
    if (!r || !kinds.includes(r.kind)) throw hostError('hostErrorInvalidValue', `0x${address.toString(16)} is not a live ${kinds.join('/')} allocation`);
    this.space.remove(address);
    if (r.device !== undefined) this.used[r.device]! -= r.bytes;
  }

  malloc(device: number, bytes: number): Address {
    return this.allocate(bytes, 'device', device);
  }

  free(_device: number, address: Address): void {
    this.scheduler.drain(); // cudaFree synchronizes too
    this.release(address, ['device', 'managed']);
  }

  hostAlloc(_device: number, bytes: number): Address {
    return this.allocate(bytes, 'pinned', undefined);
  }

  hostFree(address: Address): void {
    this.scheduler.drain();
    this.release(address, ['pinned']);
  }

  hostDevicePointer(address: Address): Address {
    this.guard();
    return address; // one address space: the device sees host memory where the host does
  }

  mallocManaged(device: number, bytes: number): Address {
    return this.allocate(bytes, 'managed', device);
  }

  hostRegister(address: Address, bytes: number): void {
    this.guard();
    const r = this.space.containing(address, bytes);
    if (!r) throw hostError('hostErrorInvalidValue', 'hostRegister of memory the backend does not know');
    if (r.registered) throw hostError('hostErrorHostMemoryAlreadyRegistered', 'memory is already registered');
    r.registered = true;
  }

  hostUnregister(address: Address): void {
    this.guard();
    const r = this.space.at(address);
    if (!r?.registered) throw hostError('hostErrorHostMemoryNotRegistered', 'memory is not registered');
    r.registered = false;
  }

  adoptHostBuffer(buffer: ArrayBuffer): Address {
    this.guard();
    return this.space.add(buffer, buffer.byteLength, 'pageable', undefined).address;
  }

  releaseHostBuffer(address: Address): void {
    this.space.remove(address);
  }

  hostView(address: Address, bytes: number): Uint8Array {
    const r = this.space.containing(address, bytes);
    if (!r) throw hostError('hostErrorInvalidValue', 'hostView of memory the backend does not know');
    return new Uint8Array(r.buffer, address - r.address, bytes);
  }

  prefetch(address: Address, bytes: number, to: MemLocation, stream: Handle): void {
    if (this.recorded(stream, (s) => this.prefetch(address, bytes, to, s))) return;
    // All memory is already where the CPU reads it; the prefetch is ordered in its stream like any other work.
    this.scheduler.enqueue(this.queue(stream), () => {});
  }

  advise(): void {
    this.guard();
  }

  protected copyNow(dst: Address, src: Address, bytes: number): void {
    const d = this.mem.bytes(dst, bytes);
    const s = this.mem.bytes(src, bytes);
    d.set(s);
  }

  /**
   * Runs `n` copies listed as (destination, source, bytes) triples, in order, each as copyNow would. A chunk's gather or scatter goes between one slot and many buffers: the region found for the copy
   * before is tried first, and the engine's own memory (device, pinned, managed: the slot's side) is written or read
   * through one view of its whole buffer kept with the region, so a copy makes one view, not two. A buffer that is
   * no longer whole (detached, shrunk) goes the way that refuses it.
   */
  protected copyListNow(list: Float64Array, n: number): void {
    let dr: HostRegion | undefined;
    let sr: HostRegion | undefined;
    for (let i = 0; i < n; i++) {
      const dst = list[3 * i]!;
      const src = list[3 * i + 1]!;
      const bytes = list[3 * i + 2]!;
      if (!(bytes > 0)) {
        this.copyNow(dst, src, bytes);
        continue;
      }
      if (dr === undefined || dst < dr.address || dst + bytes > dr.address + dr.bytes) dr = this.space.containing(dst, bytes);
      if (sr === undefined || src < sr.address || src + bytes > sr.address + sr.bytes) sr = this.space.containing(src, bytes);
      const dv = dr && ownView(dr);
      if (dr === undefined || sr === undefined || sr.buffer.byteLength < sr.bytes || (dr.kind !== 'pageable' && dv === undefined)) {
        this.copyNow(dst, src, bytes); // says what is wrong
        continue;
      }
      const from = new Uint8Array(sr.buffer, src - sr.address, bytes);
      if (dv !== undefined) dv.set(from, dst - dr.address);
      else new Uint8Array(dr.buffer, dst - dr.address, bytes).set(from);
    }
  }

  memcpy(dst: Address, src: Address, bytes: number, _kind: CopyKind): void {
    this.guard();
    this.scheduler.drain();
    this.guard();
    this.copyNow(dst, src, bytes);
  }

  memcpyAsync(dst: Address, src: Address, bytes: number, kind: CopyKind, stream: Handle): void {
    this.guard();
    if (this.recorded(stream, (s) => this.memcpyAsync(dst, src, bytes, kind, s))) return;
    this.scheduler.enqueue(this.queue(stream), () => this.copyNow(dst, src, bytes));
  }

  memcpyPeerAsync(dst: Address, _dstDevice: number, src: Address, _srcDevice: number, bytes: number, stream: Handle): void {
    this.memcpyAsync(dst, src, bytes, 3, stream);
  }

  memsetAsync(address: Address, value: number, bytes: number, stream: Handle): void {
    this.guard();
    if (this.recorded(stream, (s) => this.memsetAsync(address, value, bytes, s))) return;
    this.scheduler.enqueue(this.queue(stream), () => this.mem.bytes(address, bytes).fill(value & 0xff));
  }

  mallocAsync(device: number, bytes: number, stream: Handle): Address {
    if (this.capturing.has(stream)) throw hostError('hostErrorStreamCaptureUnsupported', 'stream-ordered allocation inside a capture');
    // Memory freed in stream order is reusable by later stream-ordered allocations: run the queued frees first.
    if (this.used[device]! + bytes > this.capacity) this.scheduler.drain();
    return this.allocate(bytes, 'device', device);
  }

  freeAsync(address: Address, stream: Handle): void {
    this.guard();
    if (this.capturing.has(stream)) throw hostError('hostErrorStreamCaptureUnsupported', 'stream-ordered free inside a capture');
    if (this.space.at(address)?.kind !== 'device') throw hostError('hostErrorInvalidValue', 'freeAsync of an address that is not device memory');
    this.scheduler.enqueue(this.queue(stream), () => this.release(address, ['device']));
  }

  configureMemPool(_device: number, _options: MemPoolOptions): void {
    this.guard();
  }

  trimMemPool(): void {
    this.guard();
  }

  protected queue(stream: Handle): HostQueue {
    const q = this.streams.get(stream);
    if (!q) throw hostError('hostErrorInvalidResourceHandle', `unknown stream ${stream}`);
    return q;
  }

  protected event(event: Handle): HostEventState {
    const e = this.events.get(event);
    if (!e) throw hostError('hostErrorInvalidResourceHandle', `unknown event ${event}`);
    return e;
  }

  /** During a capture of `stream`, records `op` (to run on the launch stream) instead of enqueuing it. */
  protected recorded(stream: Handle, op: (stream: Handle) => void): boolean {
    const ops = this.capturing.get(stream);
    if (!ops) return false;
    ops.push(op);
    return true;
  }
}

let machine: string | undefined;
/** This machine's id (/etc/machine-id, else the host name), shortened: host devices' UUIDs are made from it. */
export function machineId(): string {
  if (machine === undefined) {
    let id = '';
    try {
      id = readFileSync('/etc/machine-id', 'utf8').trim().slice(0, 12);
    } catch {
      // no machine id (containers, other systems): the host name stands in
    }
    machine = id || hostname();
  }
  return machine;
}

/** Each host device's capacity by default: a quarter of this machine's memory, at most 8 GiB. */
export function defaultHostDeviceBytes(): number {
  return Math.min(8 * 2 ** 30, Math.floor(totalmem() / 4));
}

/** Where a host device's capacity comes from, in words, for `gpumem info`. */
function hostMemorySource(capacity: number): string {
  const gib = (b: number): string => `${(b / 2 ** 30).toFixed(1)} GiB`;
  const why = capacity === defaultHostDeviceBytes() ? 'by default a quarter of it, at most 8 GiB' : 'as set';
  return `a slice of this machine's ${gib(totalmem())} of memory (${why}; GPUMEM_HOST_DEVICE_BYTES sets it)`;
}

/** The kept view of a region of the backend's own memory (device, pinned, managed), or undefined for a JS buffer or one no longer whole. */
function ownView(r: HostRegion): Uint8Array | undefined {
  if (r.kind === 'pageable') return undefined;
  const v = r.view;
  if (v !== undefined && v.length === r.bytes) return v;
  if (r.buffer.byteLength < r.bytes) return undefined;
  r.view = new Uint8Array(r.buffer, 0, r.bytes);
  return r.view;
}
