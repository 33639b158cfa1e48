/**
 * The host backend: the Backend interface implemented on the CPU, for tests and for machines without a GPU.
 * "Device" memory is host memory counted against a configurable capacity, streams are ordered queues run on the
 * event loop, events record performance.now(), kernels are JavaScript. Nothing it measures is a GPU figure, and
 * everything that prints its results says `backend: host`.
 *
 * Environment: GPUMEM_HOST_DEVICES (logical devices, default 1), GPUMEM_HOST_DEVICE_BYTES (capacity of each,
 * default a quarter of RAM, at most 8 GiB).
 */
import { readFileSync } from 'node:fs';
import { cpus, hostname, totalmem } from 'node:os';
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import { parseBytes } from '../../units.js';
import type {
  Address,
  Backend,
  DeviceMemoryUse,
  BackendCapabilities,
  CompiledModule,
  CopyKind,
  DeviceInfo,
  EventOptions,
  Handle,
  HostCopier,
  HostKernel,
  HostMemoryResolver,
  KernelArg,
  KernelSource,
  LaunchConfig,
  LibraryRecord,
  MemLocation,
  MemPoolOptions,
  NativeCopyBatch,
  PeerLink,
  StreamOptions,
  VirtualMemoryApi,
} from '../backend.js';
import { HostAddressSpace, type HostRegion } from './address-space.js';
import { HostQueue, HostScheduler, type HostEventState } from './host-queues.js';
import { InlineHostCopier } from './inline-host-copier.js';

const CAPABILITIES: BackendCapabilities = {
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
  batchCopies: true,
  graphs: true,
};

/** Options of the host backend (defaults come from the environment). */
export interface HostBackendOptions {
  devices?: number;
  deviceBytes?: number;
}

function hostError(status: string, message: string): GpuError {
  return new GpuError(ErrorCode.NATIVE, `host: ${message}`, { backend: 'host', statusName: status });
}

class HostBackend implements Backend {
  readonly name = 'host' as const;
  readonly capabilities = Object.freeze({ ...CAPABILITIES });
  readonly runtimeVersion = `node ${process.versions.node}`;
  readonly driverVersion = undefined;
  readonly libraries: readonly LibraryRecord[] = [];
  readonly vmm: VirtualMemoryApi | undefined = undefined;

  private readonly space = new HostAddressSpace();
  private readonly scheduler = new HostScheduler();
  private readonly used: number[];
  private readonly streams = new Map<Handle, HostQueue>();
  private readonly events = new Map<Handle, HostEventState>();
  private readonly modules = new Map<Handle, KernelSource>();
  private readonly functions = new Map<Handle, { kernel: HostKernel; name: string }>();
  private readonly peers = new Set<string>();
  private nextHandle = 1;
  /** Streams being captured, and the work recorded on each (replayed on the launch stream). */
  private readonly capturing = new Map<Handle, Array<(stream: Handle) => void>>();
  private readonly graphs = new Map<Handle, Array<(stream: Handle) => void>>();
  private readonly execs = new Map<Handle, Array<(stream: Handle) => void>>();
  private unusable: string | undefined;
  private disposed = false;
  private readonly mem: HostMemoryResolver;

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

  private guard(): void {
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

  private allocate(bytes: number, kind: HostRegion['kind'], device: number | undefined): Address {
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

  private release(address: Address, kinds: readonly HostRegion['kind'][]): void {
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

  private copyNow(dst: Address, src: Address, bytes: number): void {
    const d = this.mem.bytes(dst, bytes);
    const s = this.mem.bytes(src, bytes);
    d.set(s);
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

  // ---- streams and events ----------------------------------------------------------------------------------

  private queue(stream: Handle): HostQueue {
    const q = this.streams.get(stream);
    if (!q) throw hostError('hostErrorInvalidResourceHandle', `unknown stream ${stream}`);
    return q;
  }

  private event(event: Handle): HostEventState {
    const e = this.events.get(event);
    if (!e) throw hostError('hostErrorInvalidResourceHandle', `unknown event ${event}`);
    return e;
  }

  createStream(device: number, _options: StreamOptions): Handle {
    this.guard();
    const h = this.nextHandle++;
    const q = new HostQueue(device);
    this.streams.set(h, q);
    this.scheduler.add(q);
    return h;
  }

  destroyStream(_device: number, stream: Handle): void {
    this.guard();
    const q = this.queue(stream);
    this.streams.delete(stream);
    // Like cudaStreamDestroy: work already queued still runs.
    if (q.pending === 0) this.scheduler.delete(q);
    else this.scheduler.enqueue(q, () => this.scheduler.delete(q));
  }

  synchronizeStream(stream: Handle): void {
    this.guard();
    this.queue(stream);
    this.scheduler.drain();
    this.guard();
  }

  async synchronizeStreamAsync(stream: Handle): Promise<void> {
    this.guard();
    const q = this.queue(stream);
    while (q.pending > 0 && this.unusable === undefined) await this.scheduler.settled();
    this.guard();
  }

  queryStream(stream: Handle): boolean {
    this.guard();
    return this.queue(stream).pending === 0;
  }

  streamWaitEvent(stream: Handle, event: Handle): void {
    this.guard();
    if (this.recorded(stream, (s) => this.streamWaitEvent(s, event))) return;
    this.scheduler.wait(this.queue(stream), this.event(event));
  }

  launchHostFunc(stream: Handle, fn: () => void): void {
    this.guard();
    if (this.recorded(stream, (s) => this.launchHostFunc(s, fn))) return;
    this.scheduler.enqueue(this.queue(stream), fn);
  }

  createEvent(device: number, options: EventOptions): Handle {
    this.guard();
    const h = this.nextHandle++;
    this.events.set(h, { device, timing: options.timing !== false, enqueued: 0, completed: 0, time: undefined });
    return h;
  }

  destroyEvent(event: Handle): void {
    this.guard();
    this.event(event);
    this.events.delete(event);
  }

  recordEvent(event: Handle, stream: Handle): void {
    this.guard();
    if (this.recorded(stream, (s) => this.recordEvent(event, s))) return;
    const e = this.event(event);
    const ticket = ++e.enqueued;
    this.scheduler.enqueue(this.queue(stream), () => {
      e.completed = Math.max(e.completed, ticket);
      e.time = performance.now();
    });
  }

  synchronizeEvent(event: Handle): void {
    this.guard();
    this.event(event);
    this.scheduler.drain();
    this.guard();
  }

  async synchronizeEventAsync(event: Handle): Promise<void> {
    this.guard();
    const e = this.event(event);
    while (e.completed < e.enqueued && this.unusable === undefined) await this.scheduler.settled();
    this.guard();
  }

  queryEvent(event: Handle): boolean {
    this.guard();
    const e = this.event(event);
    return e.completed >= e.enqueued;
  }

  elapsedMs(start: Handle, end: Handle): number {
    this.guard();
    const a = this.event(start);
    const b = this.event(end);
    if (!a.timing || !b.timing) throw hostError('hostErrorInvalidResourceHandle', 'elapsed time of an event created without timing');
    if (a.time === undefined || b.time === undefined || a.completed < a.enqueued || b.completed < b.enqueued) {
      throw hostError('hostErrorNotReady', 'elapsed time of an event that has not completed');
    }
    return b.time - a.time;
  }

  /** During a capture of `stream`, records `op` (to run on the launch stream) instead of enqueuing it. */
  private recorded(stream: Handle, op: (stream: Handle) => void): boolean {
    const ops = this.capturing.get(stream);
    if (!ops) return false;
    ops.push(op);
    return true;
  }

  memcpyBatchAsync(batch: NativeCopyBatch, stream: Handle): void {
    this.guard();
    if (this.recorded(stream, (s) => this.memcpyBatchAsync(batch, s))) return;
    const at = (a: Uint32Array, i: number): number => a[2 * i]! + a[2 * i + 1]! * 2 ** 32;
    const copies = Array.from({ length: batch.count }, (_, i) => [at(batch.dsts, i), at(batch.srcs, i), at(batch.sizes, i)] as const);
    // One queue entry for the whole batch, as the runtime's one call; a bad address fails at run time, as on a GPU.
    this.scheduler.enqueue(this.queue(stream), () => {
      for (const [d, src, n] of copies) this.copyNow(d, src, n);
    });
  }

  createHostCopier(threads: number): HostCopier {
    this.guard();
    return new InlineHostCopier(threads, (dst, src, bytes) => this.copyNow(dst, src, bytes));
  }

  beginCapture(stream: Handle): void {
    this.guard();
    this.queue(stream);
    if (stream === 0) throw hostError('hostErrorStreamCaptureUnsupported', 'the default stream cannot be captured');
    if (this.capturing.has(stream)) throw hostError('hostErrorIllegalState', 'the stream is already being captured');
    this.capturing.set(stream, []);
  }

  endCapture(stream: Handle): Handle {
    this.guard();
    const ops = this.capturing.get(stream);
    if (!ops) throw hostError('hostErrorIllegalState', 'the stream is not being captured');
    this.capturing.delete(stream);
    const h = this.nextHandle++;
    this.graphs.set(h, ops);
    return h;
  }

  instantiateGraph(graph: Handle): Handle {
    this.guard();
    const ops = this.graphs.get(graph);
    if (!ops) throw hostError('hostErrorInvalidResourceHandle', `unknown graph ${graph}`);
    const h = this.nextHandle++;
    this.execs.set(h, [...ops]);
    return h;
  }

  launchGraph(exec: Handle, stream: Handle): void {
    this.guard();
    const ops = this.execs.get(exec);
    if (!ops) throw hostError('hostErrorInvalidResourceHandle', `unknown graph exec ${exec}`);
    if (this.recorded(stream, (s) => this.launchGraph(exec, s))) return;
    for (const op of ops) op(stream);
  }

  destroyGraphExec(exec: Handle): void {
    this.execs.delete(exec);
  }

  destroyGraph(graph: Handle): void {
    this.graphs.delete(graph);
  }

  captureHostFunc(stream: Handle, fn: () => void): () => void {
    this.guard();
    if (!this.capturing.has(stream)) throw hostError('hostErrorIllegalState', 'captureHostFunc outside a capture');
    this.launchHostFunc(stream, fn);
    return () => {};
  }

  expectHostCalls(_count: number): void {
    // host functions run on the event loop between queue steps: nothing can deadlock
  }

  // ---- peers ----------------------------------------------------------------------------------------------

  canAccessPeer(device: number, peer: number): boolean {
    this.guard();
    return device !== peer;
  }

  useDevice(): void {
    this.guard();
  }

  peerLink(device: number, peer: number): PeerLink {
    return { kind: 'host', peerAccess: this.canAccessPeer(device, peer), detail: 'logical devices in one CPU memory', source: 'host' };
  }

  enablePeerAccess(device: number, peer: number): void {
    this.guard();
    this.peers.add(`${device}:${peer}`);
  }

  disablePeerAccess(device: number, peer: number): void {
    this.guard();
    this.peers.delete(`${device}:${peer}`);
  }

  // ---- kernels (JavaScript) -------------------------------------------------------------------------------

  compile(_device: number, _source: KernelSource): CompiledModule {
    this.guard();
    return { image: new Uint8Array(0), cached: false, compileMs: 0 };
  }

  loadModule(_device: number, source: KernelSource): Handle {
    this.guard();
    const h = this.nextHandle++;
    this.modules.set(h, source);
    return h;
  }

  unloadModule(module: Handle): void {
    this.modules.delete(module);
  }

  getFunction(module: Handle, name: string): Handle {
    this.guard();
    const kernel = this.modules.get(module)?.host[name];
    if (!kernel) throw hostError('hostErrorNotFound', `no kernel named ${name} in the module`);
    const h = this.nextHandle++;
    this.functions.set(h, { kernel, name });
    return h;
  }

  packArgs(args: readonly KernelArg[]): unknown {
    return args.map((a) => a.value);
  }

  launch(fn: Handle, config: LaunchConfig, packed: unknown): void {
    this.guard();
    const f = this.functions.get(fn);
    if (!f) throw hostError('hostErrorInvalidResourceHandle', `unknown function ${fn}`);
    if (this.recorded(config.stream, (s) => this.launch(fn, { ...config, stream: s }, packed))) return;
    const args = packed as ReadonlyArray<number | bigint>;
    const cfg = { grid: config.grid, block: config.block };
    this.scheduler.enqueue(this.queue(config.stream), () => f.kernel(this.mem, cfg, args));
  }

  dispose(): void {
    this.disposed = true;
  }
}

/** Reads the host backend's options from the environment. */
export function hostOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Required<HostBackendOptions> {
  const devices = env.GPUMEM_HOST_DEVICES ? Number(env.GPUMEM_HOST_DEVICES) : 1;
  const parsed = env.GPUMEM_HOST_DEVICE_BYTES ? parseBytes(env.GPUMEM_HOST_DEVICE_BYTES) : undefined;
  const deviceBytes = parsed ?? Math.min(8 * 2 ** 30, Math.floor(totalmem() / 4));
  return { devices: Number.isInteger(devices) && devices >= 1 && devices <= 64 ? devices : 1, deviceBytes };
}

/** Creates the host backend. */
export function createHostBackend(options: HostBackendOptions = {}): Backend {
  const env = hostOptionsFromEnv();
  return new HostBackend(options.devices ?? env.devices, options.deviceBytes ?? env.deviceBytes);
}

let machine: string | undefined;
/** This machine's id (/etc/machine-id, else the host name), shortened: host devices' UUIDs are made from it. */
function machineId(): string {
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
