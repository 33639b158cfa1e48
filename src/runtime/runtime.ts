/**
 * The entry point of the library: `openRuntime()` opens a backend and answers a Runtime, which hands out typed
 * allocations, streams, events and kernels per device (the core, memory/runtime.ts) and moves data the fastest way
 * this machine has: staged uploads and downloads of JS buffers and files, lists of them, batched copies, captured
 * graphs and pipelines (transfer/).
 *
 * ```ts
 * using rt = openRuntime();                       // hip, cuda or host
 * const gpu = rt.device(0);
 * using dst = gpu.alloc(64 * MiB);
 * await rt.upload(dst, new Float32Array(16 * MiB));
 * ```
 */
import type { HostCopier } from '../backend/backend.js';
import { openBackend, type BackendSelection, type OpenBackendOptions } from '../backend/select.js';
import { Allocation } from '../memory/allocation.js';
import type { MemoryRef } from '../memory/copy.js';
import { MemoryRuntime } from '../memory/runtime.js';
import type { Stream } from '../stream/stream.js';
import { BatchMemo, planBatch, type BatchCopy, type BatchResult, type PreparedBatch } from '../transfer/batch.js';
import { captureGraph, type CapturedGraph, type CaptureScope } from '../transfer/graph.js';
import type { HostBuffer } from '../transfer/host-buffer.js';
import { runPipeline, type PipelineOptions, type PipelineResult } from '../transfer/pipeline.js';
import { transferDefaults } from '../transfer/defaults.js';
import type { FileRef } from '../transfer/file-source.js';
import {
  Stager,
  type DownloadItem,
  type FileTransferOptions,
  type FileTransferResult,
  type ManyOptions,
  type ManyResult,
  type StagerOptions,
  type TransferOptions,
  type TransferResult,
  type UploadItem,
} from '../transfer/stager.js';

export type { CopyOptions, FillOptions, MemoryRef, CopyDirection } from '../memory/copy.js';
export type { PreparedCopy, PageableAllocOptions, LiveMemory } from '../memory/runtime.js';

/** Options of {@link openRuntime}. */
export interface OpenRuntimeOptions extends OpenBackendOptions {
  /**
   * Start the transfer engine's host threads in the background when the runtime opens, and pin a device's staging
   * ring in the background: at once where the runtime sees one device, else when the program first allocates device
   * or managed memory on it (default: on GPU backends; a Node.js worker takes tens of milliseconds to boot, and pinning fresh memory about 5 ms per 8 MiB
   * chunk). A program's first transfer then finds them ready if anything happened between (filling its source,
   * reading a file); with false they start at the first transfer, which then waits for them.
   * `rt.defaultStager(d).warm()` does the same for one device on demand.
   */
  warmTransfers?: boolean;
}

/**
 * A backend and its devices, with the transfer engine on top. Disposing it stops the transfers, then frees every
 * allocation, stream and event still live.
 */
export class Runtime extends MemoryRuntime {
  /** The stager per device that rt.upload and rt.download use, made on first use. */
  private readonly defaultStagers = new Map<number, Stager>();
  private readonly batches = new BatchMemo();
  /** The host threads every default stager shares. */
  private sharedCopier: HostCopier | undefined;
  private readonly warmTransfers: boolean;
  /** Devices whose default stager's ring was warmed (at open with one device, else by a first allocation there). */
  private readonly warmedDevices = new Set<number>();

  /** Prefer {@link openRuntime}. */
  constructor(selection: BackendSelection, options: { warmTransfers?: boolean | undefined } = {}) {
    super(selection);
    // A copier that copies on the JS thread (the host backend's) has nothing to start ahead of time.
    this.warmTransfers = this.devices.length > 0 && (options.warmTransfers ?? this.backend.capabilities.hostCopierThreads);
    if (this.warmTransfers) this.copier();
    // With one device there is no wrong device to pin for: its ring starts now, while the program makes its context
    // and its first allocation (hundreds of milliseconds on a GPU). With several, at the first allocation on each.
    if (this.warmTransfers && this.devices.length === 1) this.warmRing(0);
  }

  private warmRing(device: number): void {
    if (this.warmedDevices.has(device)) return;
    this.warmedDevices.add(device);
    // Only the ring: its stream and events are made by the first transfer (no native object the program did not ask
    // for beyond the pinned chunks, which the threads allocate).
    this.defaultStager(device).ring.warm();
  }

  /**
   * @internal Adopts an allocation (see MemoryRuntime); the first device or managed allocation on a device starts
   * pinning that device's ring in the background: its context exists by then, and the program has just made the
   * destination of its first upload.
   */
  override adopt<T extends Allocation>(a: T): T {
    super.adopt(a);
    const d = a.device;
    if (this.warmTransfers && d !== undefined && (a.kind === 'device' || a.kind === 'managed')) this.warmRing(d);
    return a;
  }

  private copier(): HostCopier {
    if (!this.sharedCopier) {
      this.sharedCopier = this.backend.createHostCopier(transferDefaults().threads);
    }
    return this.sharedCopier;
  }

  /**
   * Copies a JS buffer (or pageable, pinned, mapped memory) into device or managed memory, the fastest way this
   * machine has: pageable memory through the device's stager (pinned chunks filled by several threads while the copy
   * engine moves the one before), pinned and registered memory directly. Resolves with the path it took and its rate.
   * @throws (rejects) InvalidArgumentError before anything is copied; GpuError ABORTED, BUSY; DisposedError
   */
  upload(dst: MemoryRef, src: HostBuffer, options: TransferOptions = {}): Promise<TransferResult> {
    try {
      return this.stagerFor(dst, 'upload destination').upload(dst, src, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Copies device or managed memory into a JS buffer (or pageable, pinned, mapped memory). See {@link upload}.
   * @throws as upload
   */
  download(dst: HostBuffer, src: MemoryRef, options: TransferOptions = {}): Promise<TransferResult> {
    try {
      return this.stagerFor(src, 'download source').download(dst, src, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Uploads a list of buffers, each to its place in device or managed memory, as one transfer: small buffers are
   * packed into shared pinned chunks and land with one batched copy per chunk. Resolves with one result: the whole
   * transfer's rate and each item's path.
   * @throws (rejects) InvalidArgumentError naming the item, before anything is copied; as upload otherwise
   */
  uploadMany(items: readonly UploadItem[], options: ManyOptions = {}): Promise<ManyResult> {
    try {
      return this.listStager(items, (it) => it.dst, 'uploadMany: item 0 destination').uploadMany(items, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Downloads device or managed memory into a list of buffers as one transfer. See {@link uploadMany}.
   * @throws as uploadMany
   */
  downloadMany(items: readonly DownloadItem[], options: ManyOptions = {}): Promise<ManyResult> {
    try {
      return this.listStager(items, (it) => it.src, 'downloadMany: item 0 source').downloadMany(items, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Reads a file (a path, a FileHandle or a descriptor; `offset` and `bytes` pick a range) into device or managed
   * memory at `dstOffset`: the host threads pread it straight into the pinned ring (O_DIRECT where most of the range
   * is not in the page cache and the file system allows it) while the copy engine moves the chunk before. No JS
   * buffer, no 2 GiB limit. Resolves with the way it read (`path`: direct, buffered or cufile) and, when that is not
   * the way asked, why (`fallback`).
   * @throws (rejects) InvalidArgumentError before anything is read (not a regular file; OUT_OF_BOUNDS for a range past
   *   the end of the file or a destination too small); GpuError IO_ERROR (open, read, a file that ends early),
   *   ABORTED, DisposedError
   */
  uploadFile(dst: MemoryRef, file: FileRef, options: FileTransferOptions = {}): Promise<FileTransferResult> {
    try {
      return this.stagerFor(dst, 'uploadFile destination').uploadFile(dst, file, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Writes device or managed memory (`srcOffset`, `bytes`) into a file at `offset` (a path is created if missing, and
   * never truncated): the copy engine fills the pinned ring, the host threads pwrite it out.
   * @throws as uploadFile
   */
  downloadFile(file: FileRef, src: MemoryRef, options: FileTransferOptions = {}): Promise<FileTransferResult> {
    try {
      return this.stagerFor(src, 'downloadFile source').downloadFile(file, src, options);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * The stager rt.upload & co. use for a device (made on first use, its host threads shared with the other devices').
   * @throws InvalidArgumentError for an unknown device
   */
  defaultStager(device = 0): Stager {
    this.assertOpen();
    const index = this.device(device).index;
    let st = this.defaultStagers.get(index);
    if (!st) {
      // Threads of their own are shared by every device's stager; a copier on the JS thread is each stager's own.
      st = this.createStager({ device: index, copier: this.backend.capabilities.hostCopierThreads ? this.copier() : undefined });
      this.defaultStagers.set(index, st);
    }
    return st;
  }

  /**
   * A stager of its own shape (thread count, chunk size, ring depth) for one device; disposed with the runtime if
   * not before.
   * @throws InvalidArgumentError for options out of range (a chunk below 4 KiB, a ring beyond the pinned budget)
   */
  createStager(options: StagerOptions = {}): Stager {
    this.assertOpen();
    const st = new Stager(this, options);
    this.adoptDependent(st);
    return st;
  }

  /** The stager of a list's first device memory (device 0's when there is none: its checks then name the fault). */
  private listStager<T>(items: readonly T[], device: (item: T) => MemoryRef, what: string): Stager {
    const first = Array.isArray(items) ? items[0] : undefined;
    return first && typeof first === 'object' ? this.stagerFor(device(first), what) : this.defaultStager(0);
  }

  private stagerFor(ref: MemoryRef | undefined, what: string): Stager {
    // An allocation names its device; the stager checks the rest (whose it is, that it is live) as it takes the item.
    const device = ref instanceof Allocation && ref.owner.backend === this.backend ? ref.device : this.resolve(ref as MemoryRef, what).allocation.device;
    return this.defaultStager(device ?? 0);
  }

  /** Stops the transfers (their threads first), then frees everything else. A second call does nothing. */
  override [Symbol.dispose](): void {
    if (this.disposed) return;
    // Host work in flight finishes before any ring is freed; queued work is refused.
    this.sharedCopier?.dispose();
    super[Symbol.dispose]();
  }

  /**
   * Enqueues many copies on `stream` at once: one native call where the runtime has a batch call, else one call
   * per copy. Every copy is checked first, against its memory and against the others (no overlaps). Called again
   * with the same array and unchanged copies (as a training step does), it runs the batch checked before after
   * comparing each copy with it and checking that the memory is still live.
   * @throws InvalidArgumentError (sizes, bounds, overlaps, WRONG_DEVICE), DisposedError
   */
  copyBatch(copies: readonly BatchCopy[], options: { stream: Stream }): BatchResult {
    return this.batches.run(this, copies, options?.stream);
  }

  /**
   * Checks a batch once, to enqueue it many times ({@link copyBatch} checks on every call).
   * @throws as copyBatch
   */
  prepareBatch(copies: readonly BatchCopy[], options: { stream: Stream }): PreparedBatch {
    return planBatch(this, copies, options?.stream);
  }

  /**
   * Records the work `record` enqueues on `stream` into a graph, launched later with one call
   * (`await graph.launch()`); host functions go in with the scope's `onHost`.
   * @throws GpuError UNSUPPORTED without graphs, INVALID_STATE for the default stream; what `record` throws
   */
  capture(stream: Stream, record: (scope: CaptureScope) => void): CapturedGraph {
    return captureGraph(this, stream, record);
  }

  /**
   * Upload, compute and download over chunks on two streams, double-buffered; reports the overlap reached.
   * @throws InvalidArgumentError for host memory that is not pinned or mapped, or sizes that do not fit
   */
  pipeline(options: PipelineOptions): Promise<PipelineResult> {
    return runPipeline(this, options);
  }
}

/**
 * Opens a runtime on the requested backend (`backend` option, else GPUMEM_BACKEND, else detection: hip, cuda, host).
 * When detection falls back to the host backend, `runtime.selection.notice` says why.
 * @throws InvalidArgumentError for an unknown backend name; BackendUnavailableError when a requested backend cannot load.
 */
export function openRuntime(options: OpenRuntimeOptions = {}): Runtime {
  return new Runtime(openBackend(options), { warmTransfers: options.warmTransfers });
}
