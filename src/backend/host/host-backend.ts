/**
 * The host backend: the Backend interface implemented on the CPU, for tests and for machines without a GPU.
 * "Device" memory is host memory counted against a configurable capacity, streams are ordered queues run on the
 * event loop, events record performance.now(), kernels are JavaScript. Nothing it measures is a GPU figure, and
 * everything that prints its results says `backend: host`.
 *
 * Environment: GPUMEM_HOST_DEVICES (logical devices, default 1), GPUMEM_HOST_DEVICE_BYTES (capacity of each,
 * default a quarter of RAM, at most 8 GiB).
 */
import { InvalidArgumentError } from '../../errors.js';
import { parseBytes } from '../../units.js';
import type {
  Backend,
  BatchOutcome,
  CompiledModule,
  EventOptions,
  Handle,
  HostCopier,
  KernelArg,
  KernelSource,
  LaunchConfig,
  NativeCopyBatch,
  PeerLink,
  StreamOptions,
} from '../backend.js';
import { HostQueue } from './host-queues.js';
import { InlineHostCopier } from './inline-host-copier.js';
import { defaultHostDeviceBytes, HostCore, hostError } from './host-core.js';

/** Options of the host backend (defaults come from the environment). */
export interface HostBackendOptions {
  devices?: number;
  deviceBytes?: number;
}

/** The host's batch: one queue entry for all its copies. */
const HOST_BATCH: BatchOutcome = Object.freeze({ path: 'batch' });

class HostBackend extends HostCore implements Backend {
  // ---- streams and events ----------------------------------------------------------------------------------

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
    if (q.queued === 0) this.scheduler.delete(q);
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
    while (q.queued > 0 && this.unusable === undefined) await this.scheduler.settled();
    this.guard();
  }

  queryStream(stream: Handle): boolean {
    this.guard();
    return this.queue(stream).queued === 0;
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

  memcpyBatchAsync(batch: NativeCopyBatch, stream: Handle): BatchOutcome {
    this.guard();
    if (this.recorded(stream, (s) => this.memcpyBatchAsync(batch, s))) return HOST_BATCH;
    // The batch is read now, as the runtime's call reads its arrays (the caller may reuse them once it returns).
    const n = batch.count;
    const copies = new Float64Array(3 * n);
    for (let i = 0; i < n; i++) {
      copies[3 * i] = batch.dsts[2 * i]! + batch.dsts[2 * i + 1]! * 2 ** 32;
      copies[3 * i + 1] = batch.srcs[2 * i]! + batch.srcs[2 * i + 1]! * 2 ** 32;
      copies[3 * i + 2] = batch.sizes[2 * i]! + batch.sizes[2 * i + 1]! * 2 ** 32;
    }
    // One queue entry for the whole batch, as the runtime's one call; a bad address fails at run time, as on a GPU.
    this.scheduler.enqueue(this.queue(stream), () => this.copyListNow(copies, n));
    return HOST_BATCH;
  }

  createHostCopier(threads: number): HostCopier {
    this.guard();
    return new InlineHostCopier(
      threads,
      (dst, src, bytes) => this.copyNow(dst, src, bytes),
      (list, n) => this.copyListNow(list, n),
    );
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

  /** Host memory has no coherency modes: unknown. */
  coherencyMode(): undefined {
    return undefined;
  }

  dispose(): void {
    this.disposed = true;
  }
}

/**
 * Reads the host backend's options from the environment: GPUMEM_HOST_DEVICES a whole number from 1 to 64,
 * GPUMEM_HOST_DEVICE_BYTES a size ("8GiB", "1e9") of at least 1 MiB. A value set but not valid is refused with the
 * reason rather than replaced by the default.
 * @throws InvalidArgumentError naming the variable, its value and what it must be.
 */
export function hostOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Required<HostBackendOptions> {
  const rawDevices = env.GPUMEM_HOST_DEVICES;
  const devices = rawDevices === undefined || rawDevices === '' ? 1 : Number(rawDevices.trim());
  if (!Number.isInteger(devices) || devices < 1 || devices > 64 || (rawDevices !== undefined && rawDevices.trim() === ''))
    throw new InvalidArgumentError(`GPUMEM_HOST_DEVICES="${rawDevices}": the host backend's device count must be a whole number from 1 to 64`);
  const rawBytes = env.GPUMEM_HOST_DEVICE_BYTES;
  let deviceBytes = defaultHostDeviceBytes();
  if (rawBytes !== undefined && rawBytes !== '') {
    const parsed = parseBytes(rawBytes);
    if (parsed === undefined || !Number.isSafeInteger(parsed) || parsed < 2 ** 20)
      throw new InvalidArgumentError(`GPUMEM_HOST_DEVICE_BYTES="${rawBytes}": each host device's capacity must be a size of at least 1 MiB (e.g. 8GiB)`);
    deviceBytes = parsed;
  }
  return { devices, deviceBytes };
}

/** Creates the host backend. */
export function createHostBackend(options: HostBackendOptions = {}): Backend {
  const env = hostOptionsFromEnv();
  return new HostBackend(options.devices ?? env.devices, options.deviceBytes ?? env.deviceBytes);
}
