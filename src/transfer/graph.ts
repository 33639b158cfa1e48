/**
 * Operation chains captured into a graph and launched with one call: the copies, fills, kernel launches, event
 * records and waits, and host functions enqueued on one stream while `capture` runs are recorded instead of run
 * (cudaStreamBeginCapture ... cudaGraphInstantiate; hipStreamBeginCapture ... hipGraphInstantiate), and each
 * `launch` replays all of them in their order. The host backend records the operations and replays them.
 *
 * While a stream is captured, nothing may wait for it (synchronize, waitSync, a copy without a stream): such calls
 * are refused with INVALID_STATE before the runtime sees them.
 */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { Stream } from '../stream/stream.js';

/** What the capture callback can add besides ordinary stream work. */
export interface CaptureScope {
  /** The stream being captured. */
  readonly stream: Stream;
  /** A host function run on the JS thread at every launch, in its place in the chain (the chain waits for it). */
  onHost(fn: () => void): void;
}

export class CapturedGraph implements Disposable {
  private live = true;
  private readonly releases: Array<() => void>;
  private failure: unknown;

  /** @internal */
  constructor(
    private readonly rt: MemoryRuntime,
    /** The stream it was captured on: the default stream of launches. */
    readonly stream: Stream,
    private readonly graph: number,
    private readonly exec: number,
    /** Host functions in the chain. */
    readonly hostNodes: number,
    releases: Array<() => void>,
    failures: { set: (e: unknown) => void },
  ) {
    this.releases = releases;
    failures.set = (e) => {
      this.failure ??= e;
    };
  }

  get disposed(): boolean {
    return !this.live;
  }

  /**
   * Enqueues the whole chain on `stream` (default: the stream it was captured on) with one native call, and
   * returns at once.
   * @throws DisposedError; GpuError from the runtime.
   */
  enqueue(stream: Stream = this.stream): void {
    if (!this.live) throw new DisposedError('launch: the graph was disposed');
    this.rt.checkStream(stream);
    if (stream.device !== this.stream.device)
      throw new InvalidArgumentError(`launch: the graph was captured on device ${this.stream.device}`, ErrorCode.WRONG_DEVICE);
    if (this.hostNodes > 0) this.rt.backend.expectHostCalls(this.hostNodes);
    this.rt.backend.launchGraph(this.exec, stream.handle);
  }

  /**
   * Launches the chain and resolves once it has run, host functions included; rejects with the first error a host
   * function threw during this launch.
   */
  async launch(stream: Stream = this.stream): Promise<void> {
    this.failure = undefined;
    this.enqueue(stream);
    await stream.synchronize();
    if (this.failure !== undefined) {
      const e = this.failure;
      this.failure = undefined;
      throw e;
    }
  }

  /** Destroys the graph (launches already enqueued still run). A second call does nothing. */
  [Symbol.dispose](): void {
    if (!this.live) return;
    this.live = false;
    this.rt.forgetDependent(this);
    const usable = (): boolean => !this.rt.disposed && this.rt.backend.unusableReason === undefined;
    const finish = (): void => {
      if (usable()) {
        this.rt.backend.destroyGraphExec(this.exec);
        this.rt.backend.destroyGraph(this.graph);
      }
      // Host functions are released only once no launch can call them any more.
      for (const r of this.releases) r();
    };
    if (!usable()) return finish();
    try {
      this.rt.backend.synchronizeStream(this.stream.handle, this.stream.device);
    } catch {
      // A launch in flight waits for a host function on this thread: release once it has run.
      void this.rt.backend
        .synchronizeStreamAsync(this.stream.handle)
        .catch(() => {})
        .finally(finish);
      return;
    }
    finish();
  }
}

/**
 * Captures the work `record` enqueues on `stream` into a graph. `record` runs synchronously; the capture ends when
 * it returns or throws (then nothing is kept and the error is rethrown).
 * @throws GpuError UNSUPPORTED without graphs, INVALID_STATE for the default stream or a stream already captured.
 */
export function captureGraph(rt: MemoryRuntime, stream: Stream, record: (scope: CaptureScope) => void): CapturedGraph {
  rt.assertOpen();
  rt.checkStream(stream);
  if (!rt.backend.capabilities.graphs) throw rt.unsupported('graph capture');
  if (stream.isDefault) throw new GpuError(ErrorCode.INVALID_STATE, 'capture: the default stream cannot be captured; create a stream');
  if (stream.capturing) throw new GpuError(ErrorCode.INVALID_STATE, 'capture: the stream is already being captured');
  if (typeof record !== 'function') throw new InvalidArgumentError('capture: expected a function that enqueues the work');
  const releases: Array<() => void> = [];
  const failures = { set: (_e: unknown) => {} };
  let hostNodes = 0;
  const scope: CaptureScope = {
    stream,
    onHost(fn) {
      if (typeof fn !== 'function') throw new InvalidArgumentError('onHost: expected a function');
      stream.assertLive('onHost');
      releases.push(
        rt.backend.captureHostFunc(stream.handle, () => {
          try {
            fn();
          } catch (e) {
            failures.set(e);
          }
        }),
      );
      hostNodes++;
    },
  };
  rt.backend.beginCapture(stream.handle);
  stream.capturing = true;
  rt.capturing++;
  let graph: number | undefined;
  let failed: unknown;
  try {
    const r = record(scope) as unknown;
    if (r && typeof (r as { then?: unknown }).then === 'function') {
      throw new InvalidArgumentError('capture: the function must enqueue its work synchronously (it returned a promise)');
    }
  } catch (e) {
    failed = e;
  } finally {
    stream.capturing = false;
    rt.capturing--;
    try {
      graph = rt.backend.endCapture(stream.handle);
    } catch (e) {
      failed ??= e;
    }
  }
  if (failed !== undefined) {
    if (graph !== undefined) rt.backend.destroyGraph(graph);
    for (const r of releases) r();
    throw failed;
  }
  let exec: number;
  try {
    exec = rt.backend.instantiateGraph(graph!);
  } catch (e) {
    rt.backend.destroyGraph(graph!);
    for (const r of releases) r();
    throw e;
  }
  const g = new CapturedGraph(rt, stream, graph!, exec, hostNodes, releases, failures);
  rt.adoptDependent(g);
  return g;
}
