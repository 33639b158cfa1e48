/**
 * Growable segments: a large range of address space reserved once, with physical memory mapped into it (and out
 * of it) in chunks, so that one segment grows and shrinks instead of the pool adding segments that fragment.
 * On a GPU this is the virtual memory API (cuMemAddressReserve / cuMemCreate / cuMemMap, hipMemAddressReserve /
 * hipMemCreate / hipMemMap); for replays a simulated device counts the same bytes with nothing behind them.
 */
import { ErrorCode, InvalidArgumentError, OutOfMemoryError } from '../errors.js';
import type { Backend, VirtualMemoryApi } from '../backend/backend.js';
import type { Device } from '../memory/device.js';
import type { MemoryRuntime as Runtime } from '../memory/runtime.js';
import { ReservedDeviceRange } from '../memory/allocation.js';

/** Address space with physical memory mapped in chunks; a chunk is unmapped whole. */
export abstract class GrowableSource {
  abstract readonly device: number;
  abstract readonly backend: Backend | undefined;
  /** Mapping granularity in bytes (2 MiB on current GPUs). */
  abstract readonly granularity: number;
  /** Bytes of address space to reserve per segment. */
  abstract readonly reserveBytes: number;
  private mapped = 0;
  /** Peak of mappedBytes. */
  peakMappedBytes = 0;
  /** Number of map calls (each a physical allocation). */
  mapCalls = 0;
  private readonly chunks = new Map<number, { handle: number; bytes: number }>();

  private closed: string | undefined;
  private readonly closeListeners: Array<(why: string) => void> = [];

  /** Why the address space can no longer be used (its runtime was disposed); undefined while it can. */
  get closedReason(): string | undefined {
    return this.closed;
  }

  /** Calls `listener` once the address space goes away (at once if it has). */
  onClose(listener: (why: string) => void): void {
    if (this.closed !== undefined) listener(this.closed);
    else this.closeListeners.push(listener);
  }

  /** The address space went away with what it came from: tell the pools on it. */
  protected close(why: string): void {
    if (this.closed !== undefined) return;
    this.closed = why;
    for (const l of this.closeListeners.splice(0)) l(why);
  }

  /** Physical bytes mapped now. */
  get mappedBytes(): number {
    return this.mapped;
  }

  abstract reserve(bytes: number): number;
  protected abstract freeRange(address: number, bytes: number): void;
  /** Creates physical memory, maps it at `address` and answers its handle. @throws OutOfMemoryError */
  protected abstract createAndMap(address: number, bytes: number): number;
  protected abstract unmapAndRelease(address: number, bytes: number, handle: number): void;

  /** Maps `bytes` (a multiple of the granularity) at `address` as one chunk. @throws OutOfMemoryError */
  map(address: number, bytes: number): void {
    const handle = this.createAndMap(address, bytes);
    this.chunks.set(address, { handle, bytes });
    this.mapped += bytes;
    this.mapCalls++;
    this.peakMappedBytes = Math.max(this.peakMappedBytes, this.mapped);
  }

  /**
   * Unmaps every chunk lying wholly inside [address, address + bytes); answers the bytes unmapped. Chunks start on
   * granule boundaries, so the range is walked granule by granule.
   */
  unmap(address: number, bytes: number): number {
    let n = 0;
    const end = address + bytes;
    for (let a = Math.ceil(address / this.granularity) * this.granularity; a < end; ) {
      const c = this.chunks.get(a);
      if (!c) {
        a += this.granularity;
        continue;
      }
      if (a + c.bytes > end) break;
      this.unmapAndRelease(a, c.bytes, c.handle);
      this.chunks.delete(a);
      this.mapped -= c.bytes;
      n += c.bytes;
      a += c.bytes;
    }
    return n;
  }

  /** Unmaps what is mapped in the range and gives the address space back. */
  release(address: number, bytes: number): void {
    for (const [a, c] of [...this.chunks]) {
      if (a < address || a + c.bytes > address + bytes) continue;
      this.unmapAndRelease(a, c.bytes, c.handle);
      this.chunks.delete(a);
      this.mapped -= c.bytes;
    }
    this.freeRange(address, bytes);
  }
}

/** Growable segments on a GPU through the backend's virtual memory API. */
export class VmmSource extends GrowableSource {
  readonly device: number;
  readonly backend: Backend;
  readonly granularity: number;
  readonly reserveBytes: number;
  private readonly vmm: VirtualMemoryApi;
  private readonly rt: Runtime;
  private readonly ranges = new Map<number, ReservedDeviceRange>();

  /** @throws InvalidArgumentError (UNSUPPORTED) when the backend has no virtual memory API, INVALID_SIZE for a bad reserveBytes. */
  constructor(dev: Device, options: { reserveBytes?: number } = {}) {
    super();
    const r = options.reserveBytes;
    if (r !== undefined && (!Number.isSafeInteger(r) || r <= 0))
      throw new InvalidArgumentError(`reserveBytes must be a positive whole number of bytes, got ${String(r)}`, ErrorCode.INVALID_SIZE);
    const rt = dev.runtime;
    if (!rt.backend.vmm) throw rt.unsupported('growable segments (the virtual memory API)');
    this.rt = rt;
    this.backend = rt.backend;
    this.vmm = rt.backend.vmm;
    this.device = dev.index;
    this.granularity = this.vmm.granularity(dev.index);
    const want = options.reserveBytes ?? dev.memGetInfo().totalBytes;
    this.reserveBytes = Math.ceil(want / this.granularity) * this.granularity;
    // The runtime's disposal frees the reserved ranges (they are its registered allocations).
    rt.adoptDependent({ [Symbol.dispose]: () => this.close('its runtime was disposed') });
  }

  reserve(bytes: number): number {
    const address = this.vmm.reserve(bytes, this.granularity);
    // registered with the runtime, so that copies into the pool's blocks are checked like any device memory
    this.ranges.set(address, this.rt.adopt(new ReservedDeviceRange(this.rt, address, bytes, this.device, () => this.vmm.free(address, bytes))));
    return address;
  }

  protected freeRange(address: number, bytes: number): void {
    const r = this.ranges.get(address);
    this.ranges.delete(address);
    if (r) r.free();
    else this.vmm.free(address, bytes);
  }

  protected createAndMap(address: number, bytes: number): number {
    const handle = this.vmm.create(this.device, bytes);
    try {
      this.vmm.map(address, bytes, handle);
      this.vmm.setAccess(address, bytes, this.device);
    } catch (e) {
      this.vmm.release(handle);
      throw e;
    }
    return handle;
  }

  protected unmapAndRelease(address: number, bytes: number, handle: number): void {
    this.vmm.unmap(address, bytes);
    this.vmm.release(handle);
  }
}

/** Growable segments on a simulated device (pool replay): address space and mapped bytes, counted. */
export class SimulatedGrowableSource extends GrowableSource {
  readonly device = 0;
  readonly backend = undefined;
  private next = 0x7e00_0000_0000;

  constructor(
    readonly capacityBytes = Number.MAX_SAFE_INTEGER,
    readonly granularity = 2 * 1024 * 1024,
    readonly reserveBytes = 2 ** 40,
  ) {
    super();
  }

  reserve(bytes: number): number {
    const a = this.next;
    this.next += bytes + this.granularity;
    return a;
  }

  protected freeRange(): void {}

  protected createAndMap(_address: number, bytes: number): number {
    if (this.mappedBytes + bytes > this.capacityBytes) {
      throw new OutOfMemoryError(`out of memory on the simulated device: mapping ${bytes} bytes, ${this.capacityBytes - this.mappedBytes} free`, {
        requestedBytes: bytes,
        device: 0,
        freeBytes: this.capacityBytes - this.mappedBytes,
        totalBytes: this.capacityBytes,
      });
    }
    return 0;
  }

  protected unmapAndRelease(): void {}
}
