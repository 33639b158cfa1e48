/**
 * Adaptors: resources that wrap an upstream resource and add one behaviour each. They change nothing when the
 * upstream refuses a call: counters move only after the upstream succeeded.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { GpuError, OutOfMemoryError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import type { MemoryKind } from '../memory/allocation.js';
import { checkSize } from '../memory/validate.js';
import { streamKey, type AllocateOptions, type DeallocateOptions, type MemoryResource } from './memory-resource.js';
import { ResourceBase } from './resource-base.js';
import { Stat, type StatJSON } from './stats.js';

/** Base of the adaptors: forwards everything to `upstream`. */
export abstract class Adaptor<U extends MemoryResource = MemoryResource> extends ResourceBase {
  readonly kind: MemoryKind;
  readonly device: number | undefined;
  readonly backend: Backend | undefined;

  constructor(readonly upstream: U) {
    super();
    this.kind = upstream.kind;
    this.device = upstream.device;
    this.backend = upstream.backend;
    // The upstream's memory is the adaptor's: it closes when the upstream does (disposed, or its runtime).
    this.standOn(upstream);
  }

  allocate(bytes: number, options?: AllocateOptions): number {
    this.assertOpen();
    return this.upstream.allocate(bytes, options);
  }

  deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    this.assertOpen();
    this.upstream.deallocate(address, bytes, options);
  }

  /** Disposes the adaptor and its upstream. */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.markDisposed();
    this.upstream[Symbol.dispose]();
  }
}

/** Counts requested bytes and allocations: current, peak and total. */
export class StatisticsAdaptor<U extends MemoryResource = MemoryResource> extends Adaptor<U> {
  private readonly bytes = new Stat();
  private readonly count = new Stat();

  override allocate(bytes: number, options?: AllocateOptions): number {
    const a = super.allocate(bytes, options);
    this.bytes.add(bytes);
    this.count.add(1);
    return a;
  }

  override deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    super.deallocate(address, bytes, options);
    this.bytes.sub(bytes);
    this.count.sub(1);
  }

  /** Requested bytes and allocation counts. */
  counters(): { bytes: StatJSON; allocations: StatJSON } {
    return { bytes: this.bytes.toJSON(), allocations: this.count.toJSON() };
  }
}

/** Refuses allocations that would take the live total past `limitBytes`, with OutOfMemoryError. */
export class LimitingAdaptor<U extends MemoryResource = MemoryResource> extends Adaptor<U> {
  private used = 0;

  constructor(
    upstream: U,
    readonly limitBytes: number,
  ) {
    super(upstream);
    checkSize(limitBytes, 'LimitingAdaptor limit', { allowZero: true });
  }

  get usedBytes(): number {
    return this.used;
  }

  override allocate(bytes: number, options?: AllocateOptions): number {
    this.assertOpen();
    checkSize(bytes, 'LimitingAdaptor.allocate');
    if (this.used + bytes > this.limitBytes) {
      throw new OutOfMemoryError(`out of memory: ${bytes} bytes would exceed the limit of ${this.limitBytes} (${this.used} in use)`, {
        requestedBytes: bytes,
        device: this.device,
        freeBytes: this.limitBytes - this.used,
        totalBytes: this.limitBytes,
      });
    }
    const a = super.allocate(bytes, options);
    this.used += bytes;
    return a;
  }

  override deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    super.deallocate(address, bytes, options);
    this.used -= bytes;
  }
}

/** One line of a log: gpumem's own allocation trace format (NDJSON), which `gpumem pool replay` reads. */
export interface LogLine {
  /** Microseconds since the epoch. */
  t: number;
  action: 'allocate' | 'deallocate' | 'allocate_failed';
  address?: number;
  bytes: number;
  stream: number;
  error?: string;
}

/** Writes one NDJSON line per event to a file (appending) or a function. */
export class LoggingAdaptor<U extends MemoryResource = MemoryResource> extends Adaptor<U> {
  private readonly write: (line: string) => void;
  private fd: number | undefined;

  constructor(upstream: U, sink: string | ((line: string) => void)) {
    super(upstream);
    if (typeof sink === 'string') {
      const fd = openSync(sink, 'a');
      this.fd = fd;
      this.write = (line) => writeSync(fd, line);
    } else this.write = sink;
  }

  private log(line: LogLine): void {
    this.write(`${JSON.stringify(line)}\n`);
  }

  override allocate(bytes: number, options?: AllocateOptions): number {
    const t = Math.round((performance.timeOrigin + performance.now()) * 1000);
    try {
      const address = super.allocate(bytes, options);
      this.log({ t, action: 'allocate', address, bytes, stream: streamKey(options?.stream) });
      return address;
    } catch (e) {
      this.log({ t, action: 'allocate_failed', bytes, stream: streamKey(options?.stream), error: e instanceof GpuError ? e.code : String(e) });
      throw e;
    }
  }

  override deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    super.deallocate(address, bytes, options);
    this.log({ t: Math.round((performance.timeOrigin + performance.now()) * 1000), action: 'deallocate', address, bytes, stream: streamKey(options?.stream) });
  }

  override [Symbol.dispose](): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    super[Symbol.dispose]();
  }
}

/** A live allocation as the tracking adaptor sees it. */
export interface TrackedAllocation {
  address: number;
  bytes: number;
  stream: number;
  /** performance.now() at allocation. */
  time: number;
  /** Where it was allocated, when the adaptor captures stacks. */
  stack?: string | undefined;
}

/** Keeps every live allocation (optionally with the stack that made it), to find leaks. */
export class TrackingAdaptor<U extends MemoryResource = MemoryResource> extends Adaptor<U> {
  private readonly live = new Map<number, TrackedAllocation>();

  constructor(
    upstream: U,
    private readonly options: { stacks?: boolean } = {},
  ) {
    super(upstream);
  }

  override allocate(bytes: number, options?: AllocateOptions): number {
    const address = super.allocate(bytes, options);
    this.live.set(address, {
      address,
      bytes,
      stream: streamKey(options?.stream),
      time: performance.now(),
      stack: this.options.stacks ? new Error().stack?.split('\n').slice(2).join('\n') : undefined,
    });
    return address;
  }

  override deallocate(address: number, bytes: number, options?: DeallocateOptions): void {
    super.deallocate(address, bytes, options);
    this.live.delete(address);
  }

  /** The allocations not yet deallocated, oldest first. */
  liveAllocations(): TrackedAllocation[] {
    return [...this.live.values()];
  }
}
