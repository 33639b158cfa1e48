/** Events: markers recorded in a stream, to wait on, to order streams, and to time work with the device's clock. */
import { DisposedError, ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { Backend, Handle } from '../backend/backend.js';
import type { Stream } from './stream.js';

export interface EventOwner {
  readonly backend: Backend;
  assertOpen(): void;
  /** @internal */
  forgetEvent(event: GpuEvent): void;
}

export interface EventCreateOptions {
  /** Whether the event records a time (default true). Events without timing are cheaper to wait on. */
  timing?: boolean;
  /**
   * Waiting on the event puts the waiting thread to sleep (default false: the runtime spins a CPU core while it
   * waits, which answers sooner but takes a core from host threads working at the same time).
   */
  blockingSync?: boolean;
}

export class GpuEvent implements Disposable {
  private live = true;
  private recorded = false;
  /** Last recorded inside a capture: it orders work within the graph, and launches record nothing into it. */
  private captured = false;

  constructor(
    readonly owner: EventOwner,
    readonly device: number,
    readonly handle: Handle,
    readonly timing: boolean,
  ) {}

  get disposed(): boolean {
    return !this.live;
  }

  assertLive(what = 'use'): void {
    if (!this.live) throw new DisposedError(`${what}: the event was already destroyed`);
    this.owner.assertOpen();
  }

  /** Refuses to wait on or time an event whose last record was captured (the runtime answers an error there). */
  private assertRecordedOutsideCapture(what: string): void {
    if (this.captured) {
      throw new GpuError(
        ErrorCode.INVALID_STATE,
        `${what}: the event was last recorded inside a capture, where it only orders work within the graph; record it on a stream outside the capture to wait on it`,
      );
    }
  }

  /** Records the event at the current end of `stream`. */
  record(stream: Stream): this {
    this.assertLive('record');
    stream.assertLive('record');
    if (stream.device !== this.device) {
      throw new InvalidArgumentError(`record: the event belongs to device ${this.device}, the stream to device ${stream.device}`, ErrorCode.WRONG_DEVICE);
    }
    this.owner.backend.recordEvent(this.handle, stream.handle);
    this.recorded = true;
    this.captured = stream.capturing;
    return this;
  }

  /** Resolves when the work before the event's last record has completed. Never blocks the event loop. */
  synchronize(): Promise<void> {
    try {
      this.assertLive('synchronize');
      this.assertRecordedOutsideCapture('synchronize');
    } catch (e) {
      return Promise.reject(e);
    }
    return this.owner.backend.synchronizeEventAsync(this.handle);
  }

  /**
   * Blocks the calling thread until the work before the event's last record has completed. Prefer
   * `await synchronize()`; this exists for timing loops, where handing the wait to a worker thread leaves the
   * device idle long enough to change what is measured.
   * @throws GpuError WOULD_DEADLOCK while a blocking host callback waits for this thread.
   */
  waitSync(): void {
    this.assertLive('waitSync');
    this.assertRecordedOutsideCapture('waitSync');
    this.owner.backend.synchronizeEvent(this.handle);
  }

  /** True when the event's last record has completed (or it was never recorded). */
  query(): boolean {
    this.assertLive('query');
    this.assertRecordedOutsideCapture('query');
    return this.owner.backend.queryEvent(this.handle);
  }

  /**
   * Milliseconds between `start`'s record and this event's, by the device's clock. Both must have completed.
   * @throws InvalidArgumentError when either event was created without timing or never recorded.
   */
  elapsedSince(start: GpuEvent): number {
    this.assertLive('elapsedSince');
    start.assertLive('elapsedSince');
    this.assertRecordedOutsideCapture('elapsedSince');
    start.assertRecordedOutsideCapture('elapsedSince');
    if (!this.timing || !start.timing) throw new InvalidArgumentError('elapsedSince: both events need timing: true', ErrorCode.INVALID_ARGUMENT);
    if (!this.recorded || !start.recorded) throw new InvalidArgumentError('elapsedSince: both events must have been recorded', ErrorCode.INVALID_ARGUMENT);
    return this.owner.backend.elapsedMs(start.handle, this.handle);
  }

  [Symbol.dispose](): void {
    if (!this.live) return;
    this.live = false;
    this.owner.forgetEvent(this);
    if (this.owner.backend.unusableReason === undefined) this.owner.backend.destroyEvent(this.handle);
  }
}
