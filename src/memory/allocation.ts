/**
 * Typed allocations: one class per memory kind, each with its address, size, kind and device, freed by `free()`
 * or by `using` at scope end. Host-visible kinds expose their bytes as bounds-checked typed-array views.
 */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { Address, Backend, CoherencyMode, MemAdvice, MemLocation } from '../backend/backend.js';
import { checkRange } from './validate.js';

/** The five kinds of memory. */
export type MemoryKind = 'device' | 'pinned' | 'mapped' | 'managed' | 'pageable';
export const MEMORY_KINDS: readonly MemoryKind[] = ['device', 'pinned', 'mapped', 'managed', 'pageable'];

/** What an allocation needs from the runtime (or pool) that made it. */
export interface AllocationOwner {
  readonly backend: Backend;
  /** @internal Called once when an allocation is freed, after its memory was released. */
  forget(allocation: Allocation): void;
  /** Refuses work when the owner itself was disposed. */
  assertOpen(): void;
}

type TypedArrayCtor<T> = { new (buffer: ArrayBufferLike, byteOffset: number, length: number): T; readonly BYTES_PER_ELEMENT: number };

const leaks = new FinalizationRegistry<string>((what) => {
  process.emitWarning(`${what} was garbage-collected without being freed; its memory leaked until the process exits (free it, or allocate it with \`using\`)`, {
    code: 'GPUMEM_LEAK',
  });
});

/**
 * The allocations gpumem made and handed out (the runtime adopts each one it makes; a resource vouches for each it
 * hands out as an object). An object built from the prototype, or constructed with a copied owner and address and
 * another size, is not here: it is refused before its address reaches a backend.
 */
const genuine = new WeakSet<Allocation>();

/** @internal Marks `a` as an allocation gpumem made; answers it. Not part of the public API. */
export function vouch<T extends Allocation>(a: T): T {
  genuine.add(a);
  return a;
}

/** True when `a` is an allocation gpumem made and handed out, not a copy of one or an object dressed as one. */
export function isGenuine(a: unknown): a is Allocation {
  return typeof a === 'object' && a !== null && genuine.has(a as Allocation);
}

/** The error for an object that is not an allocation gpumem made (a forged or copied one, or `this` of another call). */
function notGenuine(what: string, that: unknown): InvalidArgumentError {
  const got = that === null || typeof that !== 'object' ? String(that) : that instanceof Allocation ? 'an object built as an allocation' : 'an object';
  return new InvalidArgumentError(
    `${what}: ${got} that gpumem did not allocate (a copied or forged allocation is refused: use the object alloc returned)`,
    ErrorCode.FOREIGN_ADDRESS,
  );
}

/** Base class of every allocation. */
export abstract class Allocation implements Disposable {
  private live = true;
  private holds = 0;

  constructor(
    readonly owner: AllocationOwner,
    readonly kind: MemoryKind,
    /** Host-side address for host kinds, device address for device memory. */
    readonly address: Address,
    readonly bytes: number,
    /** The device it belongs to; undefined for host kinds. */
    readonly device: number | undefined,
    /** The address a kernel on the device uses, where the device can reach the memory. */
    readonly deviceAddress: Address | undefined,
  ) {
    leaks.register(this, `a ${bytes}-byte ${kind} allocation`, this);
  }

  /** True once freed. */
  get disposed(): boolean {
    return !this.live;
  }

  /** True when the host can read and write the bytes directly. */
  get hostVisible(): boolean {
    return this.kind !== 'device';
  }

  /**
   * How this memory is kept coherent between host and devices (AMD: hipMemRangeAttributeCoherencyMode): fine-grained,
   * coarse-grained, or indeterminate when parts differ; undefined where the backend cannot say (CUDA, host).
   * @throws DisposedError
   */
  coherencyMode(): CoherencyMode | undefined {
    this.assertLive('coherencyMode');
    return this.owner.backend.capabilities.coherencyControl ? this.owner.backend.coherencyMode(this.address, this.bytes) : undefined;
  }

  /** @throws InvalidArgumentError (FOREIGN_ADDRESS) for an object gpumem did not allocate; DisposedError once freed. */
  assertLive(what = 'use'): void {
    if (!genuine.has(this)) throw notGenuine(what, this);
    if (!this.live) throw new DisposedError(`${what}: this ${this.bytes}-byte ${this.kind} allocation was already freed`);
  }

  /**
   * The bytes as a Uint8Array (no copy), from `offset` for `length` bytes. The view is valid only while the
   * allocation is live: do not keep it past `free()`. For managed memory on a device without concurrent managed
   * access, synchronize the device's work first.
   * @throws DisposedError, InvalidArgumentError (device memory, or a range outside the allocation)
   */
  view(offset = 0, length = this.bytes - offset): Uint8Array {
    return this.typed(Uint8Array, offset, length);
  }

  /**
   * A typed-array view of `length` elements from byte `offset` (which must be aligned to the element size).
   * @throws DisposedError, InvalidArgumentError
   */
  typed<T>(ctor: TypedArrayCtor<T>, offset = 0, length?: number): T {
    this.assertLive('view');
    this.owner.assertOpen();
    if (!this.hostVisible) {
      throw new InvalidArgumentError('device memory is not visible to the host: copy it to pinned or pageable memory first', ErrorCode.INVALID_ARGUMENT);
    }
    const size = ctor.BYTES_PER_ELEMENT;
    const n = length ?? Math.floor((this.bytes - (offset as number)) / size);
    checkRange(offset, n * size, this.bytes, 'view');
    if (offset % size !== 0) throw new InvalidArgumentError(`view: offset ${offset} is not a multiple of the element size ${size}`, ErrorCode.OUT_OF_BOUNDS);
    const bytes = this.hostBytes(offset, n * size);
    return new ctor(bytes.buffer, bytes.byteOffset, n);
  }

  /** The host-visible bytes at `offset` (already checked). */
  protected hostBytes(offset: number, length: number): Uint8Array {
    return this.owner.backend.hostView(this.address + offset, length);
  }

  /** True while a transfer in flight uses the memory (freeing it is refused meanwhile). */
  get busy(): boolean {
    return this.holds > 0;
  }

  /** @internal Marks the memory in use by a transfer until {@link unhold}. */
  hold(): void {
    this.holds++;
  }

  /** @internal */
  unhold(): void {
    this.holds = Math.max(0, this.holds - 1);
  }

  /**
   * Frees the memory now.
   * @throws DisposedError (DOUBLE_FREE) when called a second time; GpuError (BUSY) while a transfer uses it;
   *   InvalidArgumentError (FOREIGN_ADDRESS) for an object gpumem did not allocate.
   */
  free(): void {
    if (!genuine.has(this)) throw notGenuine('free', this);
    if (!this.live) throw new DisposedError(`double free: this ${this.bytes}-byte ${this.kind} allocation was already freed`, ErrorCode.DOUBLE_FREE);
    if (this.holds > 0) {
      throw new GpuError(
        ErrorCode.BUSY,
        `this ${this.bytes}-byte ${this.kind} allocation is in use by a transfer in flight: await it before freeing the memory`,
      );
    }
    this.owner.assertOpen();
    // After a sticky fault the context and its memory are gone: there is nothing left to release.
    if (this.owner.backend.unusableReason === undefined) this.release();
    this.live = false;
    leaks.unregister(this);
    this.owner.forget(this);
  }

  /** Frees the memory if it is still live; a second call does nothing. */
  [Symbol.dispose](): void {
    if (!genuine.has(this)) throw notGenuine('dispose', this);
    if (this.live) this.free();
  }

  /** @internal Frees the memory even while held (the runtime's disposal, after it stopped every transfer). */
  forceFree(): void {
    this.holds = 0;
    if (this.live) this.free();
  }

  /** Marks the allocation freed without releasing memory (its owner released everything at once). */
  invalidate(): void {
    if (!this.live) return;
    this.live = false;
    this.holds = 0;
    leaks.unregister(this);
  }

  protected abstract release(): void;

  toString(): string {
    return `${this.kind} allocation of ${this.bytes} bytes at 0x${this.address.toString(16)}${this.device === undefined ? '' : ` on device ${this.device}`}`;
  }
}

/** Device memory (cudaMalloc / hipMalloc; on AMD optionally fine-grained or uncached). */
export class DeviceAllocation extends Allocation {
  constructor(
    owner: AllocationOwner,
    address: Address,
    bytes: number,
    device: number,
    readonly flags: { fineGrained?: boolean; uncached?: boolean } = {},
  ) {
    super(owner, 'device', address, bytes, device, address);
  }

  protected release(): void {
    this.owner.backend.free(this.device!, this.address);
  }
}

/**
 * Device memory that came from somewhere other than the runtime's allocator and goes back there: freeing it calls
 * the `giveBack` its source supplied instead of the runtime's free. Checked like any device allocation meanwhile.
 */
export class SourcedDeviceMemory extends Allocation {
  constructor(
    owner: AllocationOwner,
    address: Address,
    bytes: number,
    device: number,
    private readonly giveBack: () => void,
  ) {
    super(owner, 'device', address, bytes, device, address);
  }

  protected release(): void {
    this.giveBack();
  }
}

/**
 * A range of device address space reserved through the virtual memory API (a growable pool segment), registered so
 * that copies and fills into the blocks carved from it are checked like any device allocation. Physical memory is
 * mapped into parts of it by its source; freeing it gives the address space back.
 */
export class ReservedDeviceRange extends SourcedDeviceMemory {}

/** Options of pinned host memory. `coherent` and `numaUser` are AMD's. */
export interface PinnedOptions {
  portable?: boolean;
  writeCombined?: boolean;
  /**
   * AMD: coherent (fine-grained) or not (coarse-grained) pinned memory. Unset: coherent, as hipHostMalloc's default
   * flags give (and PyTorch's pinned memory is); `false` asks for coarse-grained memory, coherent only at kernel
   * boundaries. CUDA refuses the option (UNSUPPORTED).
   */
  coherent?: boolean;
  numaUser?: boolean;
  /** Place the pages on this host NUMA node (see Runtime.numaNodeFor). */
  numaNode?: number;
}

/** Page-locked host memory (cudaHostAlloc / hipHostMalloc). */
export class PinnedAllocation extends Allocation {
  constructor(
    owner: AllocationOwner,
    kind: 'pinned' | 'mapped',
    address: Address,
    bytes: number,
    deviceAddress: Address | undefined,
    readonly options: PinnedOptions,
  ) {
    super(owner, kind, address, bytes, undefined, deviceAddress);
  }

  protected release(): void {
    this.owner.backend.hostFree(this.address);
  }
}

/** Zero-copy memory: pinned host memory mapped into the device's address space. */
export class MappedAllocation extends PinnedAllocation {
  constructor(owner: AllocationOwner, address: Address, bytes: number, deviceAddress: Address, options: PinnedOptions) {
    super(owner, 'mapped', address, bytes, deviceAddress, options);
  }
}

/** Where managed memory can be moved: a device index, or the host. */
export type ManagedTarget = number | 'host';

/** Managed (unified) memory, migrated between host and device on demand or by prefetch. */
export class ManagedAllocation extends Allocation {
  constructor(
    owner: AllocationOwner,
    address: Address,
    bytes: number,
    device: number,
    readonly attach: 'global' | 'host',
    private readonly checkTarget: (to: ManagedTarget) => MemLocation,
    private readonly streamHandle: (stream: unknown) => number,
  ) {
    super(owner, 'managed', address, bytes, device, address);
  }

  /**
   * Migrates the pages to a device or to the host, ordered in `stream` (the device's default stream if none).
   * @throws DisposedError, InvalidArgumentError
   */
  prefetch(to: ManagedTarget, stream?: unknown): void {
    this.assertLive('prefetch');
    this.owner.assertOpen();
    this.owner.backend.prefetch(this.address, this.bytes, this.checkTarget(to), this.streamHandle(stream));
  }

  /**
   * Gives the driver a hint. `location` is the device (or 'host') that `preferred-location` and `accessed-by` name.
   * @throws DisposedError, InvalidArgumentError
   */
  advise(advice: MemAdvice, location: ManagedTarget = this.device!): void {
    this.assertLive('advise');
    this.owner.assertOpen();
    if ((advice === 'coarse-grain' || advice === 'unset-coarse-grain') && !this.owner.backend.capabilities.coherencyControl)
      throw new GpuError(ErrorCode.UNSUPPORTED, `${this.owner.backend.name}: '${advice}' advice is AMD's (hipMemAdviseSetCoarseGrain)`, {
        backend: this.owner.backend.name,
      });
    this.owner.backend.advise(this.address, this.bytes, advice, this.checkTarget(location));
  }

  protected release(): void {
    this.owner.backend.free(this.device!, this.address);
  }
}

/** Ordinary (pageable) JS memory, optionally registered (pinned in place) with hostRegister. */
export class PageableAllocation extends Allocation {
  private registered: boolean;

  constructor(
    owner: AllocationOwner,
    readonly buffer: ArrayBuffer,
    address: Address,
    deviceAddress: Address | undefined,
    registered: boolean,
  ) {
    super(owner, 'pageable', address, buffer.byteLength, undefined, deviceAddress);
    this.registered = registered;
  }

  /** True while the memory is registered (page-locked) with the runtime. */
  get isRegistered(): boolean {
    return this.registered;
  }

  protected override hostBytes(offset: number, length: number): Uint8Array {
    return new Uint8Array(this.buffer, offset, length);
  }

  protected release(): void {
    if (this.registered) {
      this.owner.backend.hostUnregister(this.address);
      this.registered = false;
    }
    this.owner.backend.releaseHostBuffer(this.address);
  }
}
