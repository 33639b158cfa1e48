/**
 * Memory, the second layer of what the CUDA and HIP backends share: device, pinned (on a NUMA node where asked),
 * managed, copies, fills and batched copies. native-base.ts holds errors and devices beneath it; native-backend.ts adds
 * streams, events, graphs, peers and kernels on top.
 */
import type {
  Address,
  BatchOutcome,
  CoherencyMode,
  CopyKind,
  DeviceMallocFlags,
  Handle,
  HostCopier,
  MemAdvice,
  MemLocation,
  NativeCopyBatch,
  PinnedFlags,
} from '../backend.js';
import { BatchCaller } from './batch-call.js';
import { addressOf, viewOf } from './ffi.js';
import { ThreadedHostCopier } from './host-copier.js';
import { mapOnNode, unmapNodeMemory } from './numa-memory.js';
import { RUNTIME_FLAGS } from './runtime-api.js';
import { ADVICE, type NativeParts } from './native-parts.js';
import { NativeBase } from './native-base.js';

/** cudaMemcpyDefault / hipMemcpyDefault: the direction from the addresses (unified addressing). */
const COPY_DEFAULT = 4;

/** Errors, devices and memory of a native backend; {@link NativeBackend} completes it. */
export abstract class NativeCore extends NativeBase {
  /** The batch copy, called as this release takes it. */
  private readonly batch: BatchCaller | undefined;
  /** Pinned memory placed on a NUMA node by mapOnNode: address to bytes. */
  private readonly nodeMapped = new Map<number, number>();
  private readonly pinnedAllocator: NativeParts['pinnedAllocator'];

  constructor(parts: NativeParts) {
    super(parts);
    this.pinnedAllocator = parts.pinnedAllocator;
    this.batch =
      parts.batch && parts.fns.MemcpyBatchAsync
        ? new BatchCaller(parts.fns.MemcpyBatchAsync, parts.batch, {
            name: this.name,
            fail: (status, call) => this.fail(status, call),
            copy: (dst, src, bytes, stream) => this.check(this.fn.MemcpyAsync!(dst, src, bytes, COPY_DEFAULT, stream) as number, `${this.name}MemcpyAsync`),
          })
        : undefined;
  }

  // ---- memory -------------------------------------------------------------------------------------------

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
    const copier = new ThreadedHostCopier(threads);
    // The threads pin the staging ring with the runtime's own allocator, bound from the library this backend loaded.
    const lib = this.libraries.find((l) => l.role === 'runtime' && l.loaded && l.path);
    if (lib?.path) copier.configurePinning(lib.path, this.pinnedAllocator);
    return copier;
  }
}
