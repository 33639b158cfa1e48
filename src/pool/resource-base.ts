/**
 * What every resource shares: disposal state, and typed allocations (`alloc`) on top of the raw
 * allocate/deallocate, so that pool memory is the same disposable, bounds-checked object as the core API's.
 */
import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import { Allocation, vouch, type AllocationOwner, type MemoryKind } from '../memory/allocation.js';
import { checkAlignment, checkSize } from '../memory/validate.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { AllocateOptions, DeallocateOptions, MemoryResource, StreamRef } from './memory-resource.js';

/** An allocation handed out by a resource; freeing it deallocates on the stream it was allocated on. */
export class ResourceAllocation extends Allocation {
  constructor(
    owner: AllocationOwner,
    private readonly resource: ResourceBase,
    kind: MemoryKind,
    address: number,
    bytes: number,
    device: number | undefined,
    readonly stream: StreamRef | undefined,
  ) {
    super(owner, kind, address, bytes, device, kind === 'pageable' ? undefined : address);
  }

  protected release(): void {
    this.resource.deallocate(this.address, this.bytes, { stream: this.stream });
  }

  /**
   * Frees the memory if it is still live. Once its resource closed (disposed, or its runtime or upstream disposed)
   * the memory went with it: the allocation is only marked freed, as the runtime's own allocations are then.
   */
  override [Symbol.dispose](): void {
    if (!this.disposed && this.resource.closedReason !== undefined) this.invalidate();
    else super[Symbol.dispose]();
  }
}

export abstract class ResourceBase implements MemoryResource {
  abstract readonly kind: MemoryKind;
  abstract readonly device: number | undefined;
  abstract readonly backend: Backend | undefined;
  protected disposed = false;
  private ownerCache: AllocationOwner | undefined;

  abstract allocate(bytes: number, options?: AllocateOptions): number;
  abstract deallocate(address: number, bytes: number, options?: DeallocateOptions): void;

  /** Set once what this resource stands on went away (its runtime, or its upstream, disposed): why. */
  private gone: string | undefined;
  /** The resource this one is built on, and those built on this one (told when it goes). */
  private below: ResourceBase | undefined;
  private readonly above = new Set<ResourceBase>();
  /** The hook a source leaves with its runtime, which frees every allocation of the source when it is disposed. */
  private runtimeHook: { runtime: MemoryRuntime; hook: Disposable } | undefined;

  /**
   * Why this resource can hand out no memory: it was disposed, or what it stands on (its runtime, its upstream) was,
   * which freed the memory under it. Undefined while it is usable.
   */
  get closedReason(): string | undefined {
    return this.disposed ? `the ${this.constructor.name} was disposed` : this.gone;
  }

  /** A source: the runtime's disposal frees its memory, so it closes this resource and every one built on it. */
  protected watchRuntime(runtime: MemoryRuntime): void {
    const hook = { [Symbol.dispose]: () => this.lose('its runtime was disposed') };
    runtime.adoptDependent(hook);
    this.runtimeHook = { runtime, hook };
  }

  /** An adaptor or pool: built on `upstream`, it closes when the upstream does (disposed, or its runtime). */
  protected standOn(upstream: MemoryResource | undefined): void {
    if (!(upstream instanceof ResourceBase)) return;
    this.below = upstream;
    upstream.above.add(this);
    const why = upstream.disposed ? `its upstream ${upstream.constructor.name} was disposed` : upstream.gone;
    if (why !== undefined) this.lose(why);
  }

  /** What this resource stands on went away: refuse from now on, and tell the resources built on it. */
  protected lose(why: string): void {
    if (this.gone !== undefined || this.disposed) return;
    this.gone = why;
    for (const r of this.above) r.lose(why);
  }

  /** True when the memory under this resource went away with what it stands on (its dispose has nothing to free). */
  protected get lost(): boolean {
    return this.gone !== undefined;
  }

  /** Marks the resource disposed, closes the ones built on it, and leaves the one below and the runtime. */
  protected markDisposed(): void {
    if (this.disposed) return;
    this.disposed = true;
    const why = `its upstream ${this.constructor.name} was disposed`;
    for (const r of this.above) r.lose(why);
    this.above.clear();
    this.below?.above.delete(this);
    this.below = undefined;
    if (this.runtimeHook) this.runtimeHook.runtime.forgetDependent(this.runtimeHook.hook);
    this.runtimeHook = undefined;
  }

  /** @throws DisposedError once the resource, or what it stands on, was disposed. */
  protected assertOpen(): void {
    if (this.disposed) throw new DisposedError(`the ${this.constructor.name} was disposed`);
    if (this.gone !== undefined) throw new DisposedError(`the ${this.constructor.name} cannot be used: ${this.gone}`);
  }

  /** Checks the arguments of allocate; answers the alignment to use. */
  protected checkAllocate(bytes: number, options: AllocateOptions | undefined, defaultAlignment: number): number {
    this.assertOpen();
    // The common valid case without building the message label (this is every pool hit's path).
    if (!(typeof bytes === 'number' && bytes >= 1 && bytes <= Number.MAX_SAFE_INTEGER && Number.isInteger(bytes)))
      checkSize(bytes, `${this.constructor.name}.allocate`);
    return options?.alignment === undefined ? defaultAlignment : checkAlignment(options.alignment, `${this.constructor.name}.allocate`);
  }

  /**
   * A typed allocation: disposable, bounds-checked, usable with `runtime.copy` and kernels.
   * @throws as allocate, and UNSUPPORTED on a simulated device (it has no memory to view).
   */
  alloc(bytes: number, options: AllocateOptions = {}): ResourceAllocation {
    if (!this.backend) throw new InvalidArgumentError('a simulated device has no memory to hand out as objects', ErrorCode.UNSUPPORTED);
    const address = this.allocate(bytes, options);
    return vouch(new ResourceAllocation(this.owner(), this, this.kind, address, bytes, this.device, options.stream));
  }

  private owner(): AllocationOwner {
    if (!this.ownerCache) {
      const backend = this.backend!;
      this.ownerCache = {
        backend,
        forget: () => {},
        assertOpen: () => this.assertOpen(),
      };
    }
    return this.ownerCache;
  }

  abstract [Symbol.dispose](): void;
}
