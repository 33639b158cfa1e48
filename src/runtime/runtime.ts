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
import { openBackend, type OpenBackendOptions } from '../backend/select.js';
import type { MemoryRef } from '../memory/copy.js';
import { MemoryRuntime } from '../memory/runtime.js';
import type { Stream } from '../stream/stream.js';
import { BatchMemo, planBatch, type BatchCopy, type BatchResult, type PreparedBatch } from '../transfer/batch.js';
import { captureGraph, type CapturedGraph, type CaptureScope } from '../transfer/graph.js';
import type { HostBuffer } from '../transfer/host-buffer.js';
import { runPipeline, type PipelineOptions, type PipelineResult } from '../transfer/pipeline.js';
import { Stager, type StagerOptions, type TransferOptions, type TransferResult } from '../transfer/stager.js';

export type { CopyOptions, FillOptions, MemoryRef, CopyDirection } from '../memory/copy.js';
export type { PreparedCopy, PageableAllocOptions, LiveMemory } from '../memory/runtime.js';

/** Options of {@link openRuntime}. */
export type OpenRuntimeOptions = OpenBackendOptions;

/**
 * A backend and its devices, with the transfer engine on top. Disposing it stops the transfers, then frees every
 * allocation, stream and event still live.
 */
export class Runtime extends MemoryRuntime {
  /** The stager per device that rt.upload and rt.download use, made on first use. */
  private readonly defaultStagers = new Map<number, Stager>();
  private readonly batches = new BatchMemo();

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

  private stagerFor(ref: MemoryRef, what: string): Stager {
    const device = this.resolve(ref, what).allocation.device ?? 0;
    let st = this.defaultStagers.get(device);
    if (!st) {
      st = this.createStager({ device });
      this.defaultStagers.set(device, st);
    }
    return st;
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
  return new Runtime(openBackend(options));
}
