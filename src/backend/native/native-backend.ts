/**
 * What the CUDA and HIP backends have in common: both runtimes share one API shape (cudaMalloc / hipMalloc,
 * cudaStreamCreate / hipStreamCreate, ...), so one class drives either through the functions its vendor's ffi.ts
 * declared. native-base.ts holds errors and devices, native-core.ts memory; this file adds the stream-ordered
 * allocator, streams, events, graphs, peers and kernels. The vendor subclasses add what differs: device facts,
 * allocation flags, prefetch and advice signatures, the compiler and module loader.
 */
import type {
  Address,
  Backend,
  CompiledModule,
  EventOptions,
  Handle,
  KernelArg,
  KernelSource,
  LaunchConfig,
  MemPoolOptions,
  PeerLink,
  StreamOptions,
} from '../backend.js';
import { ErrorCode, GpuError } from '../../errors.js';
import { packKernelArgs } from './ffi.js';
import { compileSource } from './rtc.js';
import { RUNTIME_FLAGS } from './runtime-api.js';
import { NativeCore } from './native-core.js';

export { nativeCapabilities, type DeviceAttributeIds, type NativeParts, type VendorCapabilities } from './native-parts.js';

/** Base class of the CUDA and HIP backends. */
export abstract class NativeBackend extends NativeCore implements Backend {
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
    const status = this.fn.LaunchHostFunc!(stream, reg.ptr, this.hostFnUserData()) as number;
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
      const status = this.fn.LaunchHostFunc!(stream, ptr, this.hostFnUserData()) as number;
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
