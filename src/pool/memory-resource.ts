/**
 * Memory resources, after RAPIDS RMM: a source gets memory from a backend; an adaptor wraps an upstream resource and
 * adds behaviour. Composition reads like `new StatisticsAdaptor(new CachingPool(new DeviceResource(device)))`.
 *
 * ## Stream-ordering rules (one place for all resources)
 *
 * - `allocate(bytes, { stream })` returns memory that work enqueued on `stream` after the call may use at once.
 *   Using it on another stream first needs that stream to be ordered after `stream` (an event), or
 *   `recordStream` on a pool.
 * - `deallocate(address, bytes, { stream })` says: the memory is free once the work already enqueued on `stream`
 *   has run. A resource may hand it out again to later work on the same stream at once (stream order protects
 *   it); to work on another stream only after an event recorded on `stream` has completed or been waited on.
 * - Without a stream, the device's default stream is meant.
 * - `bytes` passed to `deallocate` must be the size passed to `allocate`; a wrong size, an address the resource
 *   did not hand out, or a second deallocate is refused with a GpuError and leaves the resource unchanged.
 */
import type { Backend } from '../backend/backend.js';
import type { MemoryKind } from '../memory/allocation.js';
import type { Stream } from '../stream/stream.js';

/** A stream: a real one, or a number naming a stream of a simulated device (pool replay). */
export type StreamRef = Stream | number;

export interface AllocateOptions {
  stream?: StreamRef | undefined;
  /** A power of two; the resource's default alignment when absent (a pool's: 256 bytes). */
  alignment?: number | undefined;
}

export interface DeallocateOptions {
  stream?: StreamRef | undefined;
}

/** The one interface of every source and adaptor. */
export interface MemoryResource extends Disposable {
  /** What kind of memory this resource hands out. */
  readonly kind: MemoryKind;
  /** The device the memory belongs to (undefined for host kinds). */
  readonly device: number | undefined;
  /** The backend behind it; undefined for a simulated device. */
  readonly backend: Backend | undefined;
  /**
   * Allocates at least `bytes` bytes and returns the address.
   * @throws InvalidArgumentError (bad size or alignment), OutOfMemoryError, DisposedError
   */
  allocate(bytes: number, options?: AllocateOptions): number;
  /**
   * Returns memory to the resource.
   * @throws DisposedError (DOUBLE_FREE), InvalidArgumentError (FOREIGN_ADDRESS, wrong size)
   */
  deallocate(address: number, bytes: number, options?: DeallocateOptions): void;
}

/** The numeric key of a stream (its native handle; 0 for the default stream). */
export function streamKey(stream: StreamRef | undefined): number {
  if (stream === undefined) return 0;
  return typeof stream === 'number' ? stream : stream.handle;
}
