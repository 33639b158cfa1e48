/**
 * Staged transfers between a program's ordinary (pageable) memory and device or managed memory: the fastest way to
 * move a JS buffer to a GPU and back. A pageable copy through the runtime goes through the driver's own bounce
 * buffer on one thread; here the data goes through a ring of pinned chunks instead, filled (or drained) by several
 * host threads while the copy engine moves the chunk before it:
 *
 *   upload:   pageable --(threads, memcpy)--> pinned chunk k --(copy engine)--> device   (chunk k+1 filled meanwhile)
 *   download: device --(copy engine)--> pinned chunk k --(threads, memcpy)--> pageable  (chunk k+1 copied meanwhile)
 *
 * A stager owns its ring, its host copier and its stream, reuses them between transfers and runs one transfer at a
 * time (others wait their turn). Pinned and mapped sources are copied directly, registered pageable memory too; a
 * transfer below `directBelow` bytes takes the runtime's pageable copy, which costs less than the round trip.
 *
 * Every argument is checked before anything is copied. The memory on both sides is held busy until the promise
 * settles (freeing it meanwhile is refused); on an error or an abort the stager waits for the chunks in flight,
 * then rejects, and the ring is ready for the next transfer.
 */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { HostCopier } from '../backend/backend.js';
import { CopyKind } from '../backend/backend.js';
import type { Allocation, PinnedAllocation } from '../memory/allocation.js';
import type { MemoryRef } from '../memory/copy.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import { checkInteger, checkSize } from '../memory/validate.js';
import type { GpuEvent } from '../stream/event.js';
import type { Stream } from '../stream/stream.js';
import { transferDefaults } from './defaults.js';
import { checkTransferRange, resolveHost, type HostBuffer, type ResolvedHost } from './host-buffer.js';

/** How a stager is shaped. Defaults come from the machine (see defaults.ts). */
export interface StagerOptions {
  /** The device whose memory it transfers to and from (default 0). */
  device?: number;
  /** Host threads that copy between pageable memory and the pinned chunks. */
  threads?: number;
  /** Bytes of one pinned chunk (at least 4 KiB). */
  chunkBytes?: number;
  /** Chunks in the ring (2 to 64). */
  depth?: number;
  /** Transfers smaller than this take the runtime's pageable copy (0: always stage). */
  directBelow?: number;
  /** Place the pinned ring on the device's NUMA node when the machine has several (default true). */
  numaLocal?: boolean;
}

/** One transfer's options. */
export interface TransferOptions {
  /** Bytes to transfer (default: the rest of the source after its offset). */
  bytes?: number;
  srcOffset?: number;
  dstOffset?: number;
  /** The device copies go on this stream, after the work already on it (default: the stager's own stream). */
  stream?: Stream;
  /** 'auto' (default) picks as the module comment says; 'staged' and 'direct' force a path for pageable memory. */
  path?: 'auto' | 'staged' | 'direct';
  /** Aborting stops after the chunks in flight; the promise rejects with ABORTED. */
  signal?: AbortSignal;
}

/** The way a transfer went. */
export type TransferPath = 'staged' | 'direct' | 'registered' | 'pinned';

/** What a transfer did. */
export interface TransferResult {
  direction: 'upload' | 'download';
  path: TransferPath;
  bytes: number;
  /** Pinned chunks used (1 for a direct copy). */
  chunks: number;
  /** Host threads that copied (0 for a direct copy). */
  threads: number;
  chunkBytes: number;
  /** Wall-clock seconds from the call to the promise settling (GB = 1e9 bytes; one-way bytes). */
  seconds: number;
  gbps: number;
}

/** The device side of a transfer, resolved and checked. */
interface DeviceSide {
  allocation: Allocation;
  /** Offset inside the allocation, the caller's offset included. */
  offset: number;
}

const KiB = 1024;

export class Stager implements Disposable {
  readonly device: number;
  readonly threads: number;
  readonly chunkBytes: number;
  readonly depth: number;
  readonly directBelow: number;
  readonly numaLocal: boolean;
  private ring: PinnedAllocation | undefined;
  private events: GpuEvent[] = [];
  private copier: HostCopier | undefined;
  private ownStream: Stream | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  /**
   * @throws InvalidArgumentError (INVALID_SIZE) for a chunk size below 4 KiB or a ring beyond the pinned budget,
   *   INVALID_ARGUMENT for a thread count or depth out of range or an unknown device.
   */
  constructor(
    private readonly rt: MemoryRuntime,
    options: StagerOptions = {},
  ) {
    const d = transferDefaults();
    this.device = rt.device(options.device ?? 0).index;
    this.threads = checkInteger(options.threads ?? d.threads, 'stager threads', 1, 64);
    this.depth = checkInteger(options.depth ?? d.depth, 'stager depth', 2, 64);
    this.chunkBytes = checkSize(options.chunkBytes ?? d.chunkBytes, 'stager chunk', { max: d.pinnedBudgetBytes });
    if (this.chunkBytes < 4 * KiB) throw new InvalidArgumentError(`stager chunk: at least 4096 bytes, got ${this.chunkBytes}`, ErrorCode.INVALID_SIZE);
    if (this.chunkBytes * this.depth > d.pinnedBudgetBytes) {
      throw new InvalidArgumentError(
        `stager: ${this.depth} chunks of ${this.chunkBytes} bytes exceed the pinned budget of ${d.pinnedBudgetBytes} bytes (1/16 of this machine's memory)`,
        ErrorCode.INVALID_SIZE,
      );
    }
    this.directBelow = checkSize(options.directBelow ?? d.directBelow, 'stager directBelow', { allowZero: true });
    this.numaLocal = options.numaLocal ?? true;
  }

  /**
   * Copies host memory (a JS buffer or a host allocation) into device or managed memory.
   * @throws (rejects) InvalidArgumentError for bad arguments, before anything is copied; GpuError ABORTED, BUSY,
   *   NATIVE; DisposedError.
   */
  upload(dst: MemoryRef, src: HostBuffer, options: TransferOptions = {}): Promise<TransferResult> {
    return this.enqueue(() => this.transfer('upload', dst, src, options));
  }

  /**
   * Copies device or managed memory into host memory (a JS buffer or a host allocation).
   * @throws as upload.
   */
  download(dst: HostBuffer, src: MemoryRef, options: TransferOptions = {}): Promise<TransferResult> {
    return this.enqueue(() => this.transfer('download', src, dst, options));
  }

  /** Runs transfers one at a time; arguments are checked at once, so a bad call rejects without waiting its turn. */
  private enqueue(run: () => { start: () => Promise<TransferResult> }): Promise<TransferResult> {
    let prepared: { start: () => Promise<TransferResult> };
    try {
      if (this.disposed) throw new DisposedError('the stager was disposed');
      prepared = run();
    } catch (e) {
      return Promise.reject(e);
    }
    const p = this.queue.then(() => prepared.start());
    this.queue = p.catch(() => {});
    return p;
  }

  /** Checks a transfer and answers the function that runs it. */
  private transfer(direction: 'upload' | 'download', deviceRef: MemoryRef, hostBuf: HostBuffer, o: TransferOptions): { start: () => Promise<TransferResult> } {
    const rt = this.rt;
    rt.assertOpen();
    const dev = this.resolveDevice(deviceRef, direction === 'upload' ? 'upload destination' : 'download source');
    if (o.stream) {
      rt.checkStream(o.stream);
      if (o.stream.device !== this.device) {
        throw new InvalidArgumentError(`the stream belongs to device ${o.stream.device}, the stager to device ${this.device}`, ErrorCode.WRONG_DEVICE);
      }
    }
    if (o.path !== undefined && !['auto', 'staged', 'direct'].includes(o.path))
      throw new InvalidArgumentError(`path must be auto, staged or direct, got ${String(o.path)}`);
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new InvalidArgumentError('signal: expected an AbortSignal');
    const host = resolveHost(rt.backend, hostBuf, direction === 'upload' ? 'upload source' : 'download destination');
    try {
      const hostSideOffset = direction === 'upload' ? o.srcOffset : o.dstOffset;
      const devSideOffset = direction === 'upload' ? o.dstOffset : o.srcOffset;
      const hostRange = checkTransferRange(hostSideOffset, o.bytes, host.bytes, direction === 'upload' ? 'upload source' : 'download destination');
      const bytes = hostRange.bytes;
      const devRange = checkTransferRange(
        devSideOffset,
        bytes,
        dev.allocation.bytes - dev.offset,
        direction === 'upload' ? 'upload destination' : 'download source',
      );
      const path = this.pathFor(host, bytes, o.path ?? 'auto');
      const job: Job = {
        direction,
        path,
        bytes,
        hostAddress: host.address + hostRange.offset,
        devAllocation: dev.allocation,
        devOffset: dev.offset + devRange.offset,
        stream: o.stream,
        signal: o.signal,
      };
      // Both sides are held busy from the call until the promise settles, waiting for its turn included.
      job.devAllocation.hold();
      host.allocation?.hold();
      return { start: () => this.run(job, host) };
    } catch (e) {
      host.release();
      throw e;
    }
  }

  private resolveDevice(ref: MemoryRef, what: string): DeviceSide {
    const { allocation, offset } = this.rt.resolve(ref, what);
    if (allocation.kind !== 'device' && allocation.kind !== 'managed') {
      throw new InvalidArgumentError(`${what}: expected device or managed memory, got ${allocation.kind} memory (copy between host buffers with rt.copy)`);
    }
    if (allocation.device !== this.device) {
      throw new InvalidArgumentError(`${what}: the memory belongs to device ${allocation.device}, the stager to device ${this.device}`, ErrorCode.WRONG_DEVICE);
    }
    return { allocation, offset };
  }

  private pathFor(host: ResolvedHost, bytes: number, asked: 'auto' | 'staged' | 'direct'): TransferPath {
    if (host.kind === 'pinned' || host.kind === 'mapped') return 'pinned';
    if (host.kind === 'registered') return 'registered';
    if (asked === 'direct') return 'direct';
    if (asked === 'staged') return 'staged';
    return bytes < this.directBelow ? 'direct' : 'staged';
  }

  /** Runs a checked transfer, holding both sides busy until it settles. */
  private async run(job: Job, host: ResolvedHost): Promise<TransferResult> {
    const t0 = performance.now();
    let chunks = 1;
    try {
      if (this.disposed) throw new DisposedError('the stager was disposed');
      this.rt.assertOpen();
      job.devAllocation.assertLive(job.direction === 'upload' ? 'upload destination' : 'download source');
      host.allocation?.assertLive(job.direction === 'upload' ? 'upload source' : 'download destination');
      if (job.signal?.aborted) throw aborted();
      if (job.path === 'staged') chunks = job.direction === 'upload' ? await this.stagedUpload(job) : await this.stagedDownload(job);
      else await this.directCopy(job);
    } finally {
      job.devAllocation.unhold();
      host.allocation?.unhold();
      host.release();
    }
    const seconds = (performance.now() - t0) / 1e3;
    return {
      direction: job.direction,
      path: job.path,
      bytes: job.bytes,
      chunks,
      threads: job.path === 'staged' ? this.threads : 0,
      chunkBytes: job.path === 'staged' ? this.chunkBytes : job.bytes,
      seconds,
      gbps: job.bytes / seconds / 1e9,
    };
  }

  /** One runtime copy on the stream (pageable memory: the runtime stages it itself), then a wait off the event loop. */
  private async directCopy(job: Job): Promise<void> {
    const stream = job.stream ?? this.stream();
    const devAddress = job.devAllocation.address + job.devOffset;
    const toManaged = job.devAllocation.kind === 'managed';
    if (job.direction === 'upload')
      this.rt.backend.memcpyAsync(devAddress, job.hostAddress, job.bytes, toManaged ? CopyKind.Default : CopyKind.HostToDevice, stream.handle);
    else this.rt.backend.memcpyAsync(job.hostAddress, devAddress, job.bytes, toManaged ? CopyKind.Default : CopyKind.DeviceToHost, stream.handle);
    await stream.synchronize();
  }

  /** The stager's own stream, ring, events and host copier, made on first use. */
  private stream(): Stream {
    this.ownStream ??= this.rt.device(this.device).createStream({ nonBlocking: true });
    return this.ownStream;
  }

  private prepareRing(): { ring: PinnedAllocation; events: GpuEvent[]; copier: HostCopier } {
    if (!this.ring) {
      const dev = this.rt.device(this.device);
      const node = this.numaLocal ? this.rt.numaNodeFor(this.device) : undefined;
      this.ring = this.rt.allocPinned(this.chunkBytes * this.depth, node === undefined ? {} : { numaNode: node });
      // Blocking-sync events: a wait sleeps instead of spinning a core the copy threads need.
      this.events = Array.from({ length: this.depth }, () => dev.createEvent({ timing: false, blockingSync: true }));
      this.copier = this.rt.backend.createHostCopier(this.threads);
    }
    return { ring: this.ring, events: this.events, copier: this.copier! };
  }

  private async stagedUpload(job: Job): Promise<number> {
    const { ring, events, copier } = this.prepareRing();
    const stream = job.stream ?? this.stream();
    const C = this.chunkBytes;
    const n = Math.ceil(job.bytes / C);
    const size = (k: number): number => Math.min(C, job.bytes - k * C);
    const fills: Array<Promise<void>> = [];
    const dmaDone: Array<Promise<void>> = [];
    // Post the fill of chunk k once its slot's previous copy to the device has finished.
    const post = (k: number): Promise<void> => {
      const slotFree = k >= this.depth ? dmaDone[k - this.depth]! : Promise.resolve();
      return slotFree.then(() => copier.copy(ring.address + (k % this.depth) * C, job.hostAddress + k * C, size(k)));
    };
    let posted = 0;
    try {
      for (let k = 0; k < n; k++) {
        while (posted < n && posted < k + this.depth) fills[posted] = handled(post(posted++));
        await fills[k];
        if (job.signal?.aborted) throw aborted();
        this.rt.copy(job.devAllocation, ring, { dstOffset: job.devOffset + k * C, srcOffset: (k % this.depth) * C, bytes: size(k), stream });
        events[k % this.depth]!.record(stream);
        dmaDone[k] = handled(inOrder(dmaDone[k - 1], events[k % this.depth]!));
      }
      await stream.synchronize();
      return n;
    } catch (e) {
      await settleAll([...fills, ...dmaDone], stream);
      throw e;
    }
  }

  private async stagedDownload(job: Job): Promise<number> {
    const { ring, events, copier } = this.prepareRing();
    const stream = job.stream ?? this.stream();
    const C = this.chunkBytes;
    const n = Math.ceil(job.bytes / C);
    const size = (k: number): number => Math.min(C, job.bytes - k * C);
    const drains: Array<Promise<void>> = [];
    const dmaDone: Array<Promise<void>> = [];
    try {
      for (let k = 0; k < n; k++) {
        // The slot is free once the threads have copied its previous chunk out.
        if (k >= this.depth) await drains[k - this.depth];
        if (job.signal?.aborted) throw aborted();
        const slot = k % this.depth;
        this.rt.copy(ring, job.devAllocation, { dstOffset: slot * C, srcOffset: job.devOffset + k * C, bytes: size(k), stream });
        events[slot]!.record(stream);
        dmaDone[k] = handled(inOrder(dmaDone[k - 1], events[slot]!));
        drains[k] = handled(dmaDone[k]!.then(() => copier.copy(job.hostAddress + k * C, ring.address + slot * C, size(k))));
      }
      await Promise.all(drains);
      return n;
    } catch (e) {
      await settleAll([...drains, ...dmaDone], stream);
      throw e;
    }
  }

  /**
   * Frees the ring, the events and the stream, and stops the threads. Host copies in flight are waited for on this
   * thread and so is the stream's work, so that no copy touches memory freed here; transfers still running reject.
   */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.disposed = true;
    this.copier?.dispose();
    const live = !this.rt.disposed && this.rt.backend.unusableReason === undefined;
    if (live && this.ownStream && !this.ownStream.disposed) {
      try {
        this.ownStream.waitSync();
      } catch {
        // the stream's work failed: nothing more can land in the ring
      }
    }
    for (const e of this.events) e[Symbol.dispose]();
    if (this.ring && !this.ring.disposed) this.ring.forceFree();
    this.ownStream?.[Symbol.dispose]();
  }
}

interface Job {
  direction: 'upload' | 'download';
  path: TransferPath;
  bytes: number;
  hostAddress: number;
  devAllocation: Allocation;
  devOffset: number;
  stream: Stream | undefined;
  signal: AbortSignal | undefined;
}

function aborted(): GpuError {
  return new GpuError(ErrorCode.ABORTED, 'the transfer was aborted: the chunks in flight finished, nothing more was copied');
}

/**
 * Waits for `event` once the previous chunk's wait has ended: one waiting thread at a time instead of one per chunk
 * in flight (each wait holds a thread of libuv's small pool until it returns).
 */
function inOrder(previous: Promise<void> | undefined, event: GpuEvent): Promise<void> {
  return previous ? previous.then(() => event.synchronize()) : event.synchronize();
}

/** Marks a promise handled (it is awaited later, or left behind on an error) and answers it. */
function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

/** After a failure: waits for everything already started, host copies and the stream's work, before giving up the ring. */
async function settleAll(started: Array<Promise<unknown> | undefined>, stream: Stream): Promise<void> {
  await Promise.allSettled(started.filter((p): p is Promise<unknown> => p !== undefined));
  await stream.synchronize().catch(() => {});
}
