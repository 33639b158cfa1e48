/**
 * What every resource shares: disposal state, and typed allocations (`alloc`) on top of the raw
 * allocate/deallocate, so that pool memory is the same disposable, bounds-checked object as the core API's.
 */
import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import { Allocation, type AllocationOwner, type MemoryKind } from '../memory/allocation.js';
import { checkAlignment, checkSize } from '../memory/validate.js';
import type { AllocateOptions, DeallocateOptions, MemoryResource, StreamRef } from './memory-resource.js';

/** An allocation handed out by a resource; freeing it deallocates on the stream it was allocated on. */
export class ResourceAllocation extends Allocation {
  constructor(
    owner: AllocationOwner,
    private readonly resource: MemoryResource,
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
}

export abstract class ResourceBase implements MemoryResource {
  abstract readonly kind: MemoryKind;
  abstract readonly device: number | undefined;
  abstract readonly backend: Backend | undefined;
  protected disposed = false;
  private ownerCache: AllocationOwner | undefined;

  abstract allocate(bytes: number, options?: AllocateOptions): number;
  abstract deallocate(address: number, bytes: number, options?: DeallocateOptions): void;

  /** @throws DisposedError once the resource was disposed. */
  protected assertOpen(): void {
    if (this.disposed) throw new DisposedError(`the ${this.constructor.name} was disposed`);
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
    return new ResourceAllocation(this.owner(), this, this.kind, address, bytes, this.device, options.stream);
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
