/**
 * Sources: resources that get memory straight from the backend (or, for replays, from a simulated device).
 * Every allocate is a native allocation here; pools sit on top to avoid that.
 */
import { DisposedError, ErrorCode, InvalidArgumentError, OutOfMemoryError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import type { Allocation, MemoryKind, PinnedOptions } from '../memory/allocation.js';
import type { Device } from '../memory/device.js';
import type { MemoryRuntime as Runtime } from '../memory/runtime.js';
import { checkSize } from '../memory/validate.js';
import { streamKey, type AllocateOptions, type DeallocateOptions } from './memory-resource.js';
import { ResourceBase } from './resource-base.js';

/** Remembers recently freed addresses so that a second deallocate is named a double free, not a foreign address. */
class FreedAddresses {
  private readonly set = new Set<number>();
  constructor(private readonly limit = 4096) {}
  add(address: number): void {
    this.set.add(address);
    if (this.set.size > this.limit) this.set.delete(this.set.values().next().value as number);
  }
  delete(address: number): void {
    this.set.delete(address);
  }
  has(address: number): boolean {
    return this.set.has(address);
  }
}

/** Checks a deallocate against what is live; throws without changing anything. */
function checkDeallocate(name: string, live: Map<number, { bytes: number }>, freed: FreedAddresses, address: number, bytes: number): void {
  const entry = live.get(address);
  if (!entry) {
    if (freed.has(address)) throw new DisposedError(`${name}: double free of 0x${address.toString(16)}`, ErrorCode.DOUBLE_FREE);
    throw new InvalidArgumentError(`${name}: 0x${address.toString(16)} was not allocated by this resource`, ErrorCode.FOREIGN_ADDRESS);
  }
  if (bytes !== entry.bytes) {
    throw new InvalidArgumentError(
      `${name}: deallocate of 0x${address.toString(16)} with ${bytes} bytes, but it was allocated with ${entry.bytes}`,
      ErrorCode.INVALID_ARGUMENT,
    );
  }
}

/** A source whose memory is the core API's typed allocations (registered with the runtime, freed on dispose). */
abstract class AllocationSource extends ResourceBase {
  private readonly live = new Map<number, Allocation>();
  private readonly freed = new FreedAddresses();

  constructor(runtime: Runtime) {
    super();
    // The runtime's disposal frees every allocation of this source: none may be handed out or given back since.
    this.watchRuntime(runtime);
  }

  protected abstract make(bytes: number): Allocation;

  allocate(bytes: number, options?: AllocateOptions): number {
    const alignment = this.checkAllocate(bytes, options, 256);
    if (alignment > 256) throw new InvalidArgumentError(`${this.constructor.name}: alignment above 256 bytes needs a pool`, ErrorCode.INVALID_ARGUMENT);
    const a = this.make(bytes);
    this.live.set(a.address, a);
    this.freed.delete(a.address);
    return a.address;
  }

  deallocate(address: number, bytes: number, _options?: DeallocateOptions): void {
    this.assertOpen();
    checkDeallocate(this.constructor.name, this.live, this.freed, address, bytes);
    const a = this.live.get(address)!;
    a.free();
    this.live.delete(address);
    this.freed.add(address);
  }

  /** Live allocations: count and bytes. */
  get liveBytes(): number {
    let n = 0;
    for (const a of this.live.values()) n += a.bytes;
    return n;
  }

  /** Frees what is still allocated; after the runtime's disposal (which freed it all) it only marks itself disposed. */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    if (!this.lost) for (const a of this.live.values()) a[Symbol.dispose]();
    this.live.clear();
    this.markDisposed();
  }
}

/** Device memory, one cudaMalloc / hipMalloc per allocate. */
export class DeviceResource extends AllocationSource {
  readonly kind = 'device' as const;
  readonly device: number;
  readonly backend: Backend;
  constructor(
    private readonly dev: Device,
    private readonly options: { fineGrained?: boolean; uncached?: boolean } = {},
  ) {
    super(dev.runtime);
    this.device = dev.index;
    this.backend = dev.runtime.backend;
  }
  protected make(bytes: number): Allocation {
    return this.dev.alloc(bytes, this.options);
  }
}

/** Managed memory, one cudaMallocManaged / hipMallocManaged per allocate. */
export class ManagedResource extends AllocationSource {
  readonly kind = 'managed' as const;
  readonly device: number;
  readonly backend: Backend;
  constructor(private readonly dev: Device) {
    super(dev.runtime);
    this.device = dev.index;
    this.backend = dev.runtime.backend;
  }
  protected make(bytes: number): Allocation {
    return this.dev.allocManaged(bytes);
  }
}

/** Pinned host memory, one cudaHostAlloc / hipHostMalloc per allocate (about a millisecond each: pool it). */
export class PinnedResource extends AllocationSource {
  readonly kind = 'pinned' as const;
  readonly device = undefined;
  readonly backend: Backend;
  constructor(
    private readonly rt: Runtime,
    private readonly options: PinnedOptions = {},
  ) {
    super(rt);
    this.backend = rt.backend;
  }
  protected make(bytes: number): Allocation {
    return this.rt.allocPinned(bytes, this.options);
  }
}

/**
 * The runtime's stream-ordered pool: cudaMallocAsync / hipMallocAsync on the given stream. `releaseThresholdBytes`
 * is how much freed memory the driver keeps cached before returning it to the system.
 */
export class AsyncPoolResource extends ResourceBase {
  readonly kind = 'device' as const;
  readonly device: number;
  readonly backend: Backend;
  private readonly live = new Map<number, { bytes: number }>();
  private readonly freed = new FreedAddresses();

  constructor(dev: Device, options: { releaseThresholdBytes?: number } = {}) {
    super();
    const rt = dev.runtime;
    this.device = dev.index;
    this.backend = rt.backend;
    if (!this.backend.capabilities.streamOrderedAllocator) throw rt.unsupported('the stream-ordered allocator');
    if (options.releaseThresholdBytes !== undefined) {
      checkSize(options.releaseThresholdBytes, 'releaseThresholdBytes', { allowZero: true });
      this.backend.configureMemPool(this.device, { releaseThresholdBytes: options.releaseThresholdBytes });
    }
    // The runtime's disposal releases the driver's pool and everything in it.
    this.watchRuntime(rt);
  }

  allocate(bytes: number, options?: AllocateOptions): number {
    const alignment = this.checkAllocate(bytes, options, 256);
    if (alignment > 256) throw new InvalidArgumentError('AsyncPoolResource: alignment above 256 bytes needs a pool', ErrorCode.INVALID_ARGUMENT);
    const address = this.backend.mallocAsync(this.device, bytes, streamKey(options?.stream));
    this.live.set(address, { bytes });
    this.freed.delete(address);
    return address;
  }

  deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    this.assertOpen();
    checkDeallocate('AsyncPoolResource', this.live, this.freed, address, bytes);
    this.backend.freeAsync(address, streamKey(options?.stream));
    this.live.delete(address);
    this.freed.add(address);
  }

  /**
   * Returns cached memory of the driver's pool to the system, keeping `keepBytes`.
   * @throws DisposedError once it or its runtime was disposed.
   */
  trim(keepBytes = 0): void {
    this.assertOpen();
    this.backend.trimMemPool(this.device, keepBytes);
  }

  /** Frees what is still allocated; after the runtime's disposal (which released it all) it only marks itself disposed. */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    if (!this.lost) for (const address of this.live.keys()) this.backend.freeAsync(address, 0);
    this.live.clear();
    this.markDisposed();
  }
}

/**
 * A simulated device for replays: hands out addresses and counts bytes against a capacity, with no memory behind
 * them. It runs anywhere and is never a GPU measurement.
 */
export class SimulatedResource extends ResourceBase {
  readonly device = 0;
  readonly backend = undefined;
  private next = 0x7f00_0000_0000;
  private readonly live = new Map<number, { bytes: number }>();
  private readonly freed = new FreedAddresses();
  private used = 0;
  /** How many times allocate was called and succeeded: the segment allocations of a pool on top. */
  allocations = 0;
  peakBytes = 0;

  constructor(
    readonly capacityBytes = Number.MAX_SAFE_INTEGER,
    readonly kind: MemoryKind = 'device',
  ) {
    super();
  }

  get usedBytes(): number {
    return this.used;
  }

  allocate(bytes: number, options?: AllocateOptions): number {
    this.checkAllocate(bytes, options, 256);
    if (this.used + bytes > this.capacityBytes) {
      throw new OutOfMemoryError(
        `out of memory on the simulated device: ${bytes} bytes requested, ${this.capacityBytes - this.used} free of ${this.capacityBytes}`,
        {
          requestedBytes: bytes,
          device: 0,
          freeBytes: this.capacityBytes - this.used,
          totalBytes: this.capacityBytes,
        },
      );
    }
    const address = this.next;
    this.next += Math.ceil(bytes / 2 ** 21) * 2 ** 21 + 2 ** 21;
    this.live.set(address, { bytes });
    this.used += bytes;
    this.peakBytes = Math.max(this.peakBytes, this.used);
    this.allocations++;
    return address;
  }

  deallocate(address: number, bytes: number): void {
    this.assertOpen();
    checkDeallocate('SimulatedResource', this.live, this.freed, address, bytes);
    this.live.delete(address);
    this.freed.add(address);
    this.used -= bytes;
  }

  [Symbol.dispose](): void {
    this.markDisposed();
  }
}

export type { MemoryKind };
