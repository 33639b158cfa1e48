/**
 * Streams: ordered queues of device work. Work on one stream runs in order; work on different streams may overlap.
 * `await stream.synchronize()` waits on a worker thread, never blocking the event loop.
 */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { Backend, Handle } from '../backend/backend.js';
import type { GpuEvent } from './event.js';

/** What a stream needs from the runtime that made it. */
export interface StreamOwner {
  readonly backend: Backend;
  assertOpen(): void;
  /** @internal Creates a non-timing event used internally for host callbacks. */
  internalEvent(device: number): GpuEvent;
  /** @internal The default stream of a device. */
  defaultStream(device: number): Stream;
  /** @internal */
  forgetStream(stream: Stream): void;
}

export interface StreamCreateOptions {
  /** Lower numbers are higher priority (CUDA and HIP: 0 is the default, negative is higher). */
  priority?: number;
  /** A non-blocking stream does not synchronize with the legacy default stream. */
  nonBlocking?: boolean;
}

export class Stream implements Disposable {
  private live = true;
  /** @internal True while `Runtime.capture` records this stream's work. */
  capturing = false;

  constructor(
    readonly owner: StreamOwner,
    readonly device: number,
    /** The native handle; 0 is the device's default stream. */
    readonly handle: Handle,
    readonly priority: number,
    readonly nonBlocking: boolean,
  ) {}

  /** True for the default stream, which cannot be destroyed. */
  get isDefault(): boolean {
    return this.handle === 0;
  }

  get disposed(): boolean {
    return !this.live;
  }

  /** @throws DisposedError when the stream was destroyed. */
  assertLive(what = 'use'): void {
    if (!this.live) throw new DisposedError(`${what}: the stream was already destroyed`);
    this.owner.assertOpen();
  }

  /** Makes later work on this stream wait until `event`'s most recent record has completed. */
  waitEvent(event: GpuEvent): void {
    this.assertLive('waitEvent');
    event.assertLive('waitEvent');
    if ((event.owner as unknown) !== this.owner) throw new InvalidArgumentError('waitEvent: the event belongs to another runtime', ErrorCode.FOREIGN_ADDRESS);
    this.owner.backend.streamWaitEvent(this.handle, event.handle);
  }

  /**
   * Runs `fn` on the JS thread once all work enqueued so far has completed, and resolves with its result.
   *
   * By default the stream does not wait for `fn`: later work may start before it runs. With `blocking: true` the
   * stream waits until `fn` has returned (cudaLaunchHostFunc / hipLaunchHostFunc); until then blocking calls such
   * as a copy without a stream are refused with WOULD_DEADLOCK, since they would wait for this very thread.
   */
  onHost<T>(fn: () => T, options: { blocking?: boolean } = {}): Promise<T> {
    this.assertLive('onHost');
    if (this.capturing)
      throw new GpuError(ErrorCode.INVALID_STATE, "onHost: inside a capture, add host functions with the capture scope's onHost (they run at every launch)");
    if (options.blocking) {
      if (!this.owner.backend.capabilities.blockingHostCallbacks) {
        throw new InvalidArgumentError(`onHost: the ${this.owner.backend.name} runtime has no blocking host callbacks`, ErrorCode.UNSUPPORTED);
      }
      return new Promise<T>((resolve, reject) => {
        this.owner.backend.launchHostFunc(this.handle, () => {
          try {
            resolve(fn());
          } catch (e) {
            reject(e);
          }
        });
      });
    }
    const event = this.owner.internalEvent(this.device);
    event.record(this);
    return event.synchronize().then(
      () => {
        event[Symbol.dispose]();
        return fn();
      },
      (e: unknown) => {
        event[Symbol.dispose]();
        throw e;
      },
    );
  }

  /** Refuses a wait on a stream whose work is being captured (the capture would fail). */
  private assertNotCapturing(what: string): void {
    if (this.capturing)
      throw new GpuError(ErrorCode.INVALID_STATE, `${what}: the stream is being captured into a graph; nothing on it runs until the graph is launched`);
  }

  /** Resolves when all work enqueued so far has completed. Never blocks the event loop. */
  synchronize(): Promise<void> {
    try {
      this.assertLive('synchronize');
      this.assertNotCapturing('synchronize');
    } catch (e) {
      return Promise.reject(e);
    }
    return this.owner.backend.synchronizeStreamAsync(this.handle);
  }

  /**
   * Blocks the calling thread until all work enqueued so far has completed. Prefer `await synchronize()`; this
   * exists for timing loops, which wait on their own thread as native programs do (waiting on a worker thread
   * instead makes the small copies timed next measurably slower).
   * @throws GpuError WOULD_DEADLOCK while a blocking host callback waits for this thread; DisposedError.
   */
  waitSync(): void {
    this.assertLive('waitSync');
    this.assertNotCapturing('waitSync');
    this.owner.backend.synchronizeStream(this.handle, this.device);
  }

  /** True when all work enqueued so far has completed. */
  query(): boolean {
    this.assertLive('query');
    this.assertNotCapturing('query');
    return this.owner.backend.queryStream(this.handle);
  }

  /** Destroys the stream (work already enqueued still runs). The default stream is never destroyed. */
  [Symbol.dispose](): void {
    if (!this.live || this.isDefault) return;
    this.live = false;
    this.owner.forgetStream(this);
    if (this.owner.backend.unusableReason === undefined) this.owner.backend.destroyStream(this.device, this.handle);
  }
}
