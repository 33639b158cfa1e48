/**
 * Host functions a stream calls (cudaLaunchHostFunc / hipLaunchHostFunc): a koffi callback registered per launch,
 * run on the JS thread when the driver's thread calls it, and released once it has run. While one waits, a blocking
 * call on the JS thread would deadlock: `waiting` lets the backend refuse such calls.
 */
import { registerHostCallback, unregisterCallback } from './ffi.js';

export class HostCallbacks {
  private unrun = 0;
  private readonly live = new Set<bigint>();

  /** Blocking host functions enqueued and not run yet (they wait for the JS thread). */
  get waiting(): number {
    return this.unrun;
  }

  /**
   * Registers `fn` for one call and hands its pointer to `enqueue` (which launches it, and throws if the launch
   * failed: the registration is then released at once).
   */
  launchOnce(fn: () => void, enqueue: (ptr: bigint) => void): void {
    let ptr: bigint | undefined;
    // A call back from a driver thread holds no reference on the event loop: keep it alive until the call comes.
    const keepAlive = setInterval(() => {}, 2 ** 30);
    const run = (): void => {
      clearInterval(keepAlive);
      this.unrun--;
      try {
        fn();
      } finally {
        // Unregistering from inside the callback is not safe; do it once the driver thread has returned.
        setImmediate(() => {
          if (ptr !== undefined && this.live.delete(ptr)) unregisterCallback(ptr);
        });
      }
    };
    ptr = registerHostCallback(run);
    this.live.add(ptr);
    this.unrun++;
    try {
      enqueue(ptr);
    } catch (e) {
      clearInterval(keepAlive);
      this.unrun--;
      this.live.delete(ptr);
      unregisterCallback(ptr);
      throw e;
    }
  }

  /**
   * Registers `fn` for as many calls as come (a host node of a captured graph runs at every launch); each call is
   * one that {@link expect} announced. The returned function releases it; call it only once nothing can call the
   * pointer any more.
   */
  register(fn: () => void): { ptr: bigint; release: () => void } {
    const ptr = registerHostCallback(() => {
      this.unrun = Math.max(0, this.unrun - 1);
      fn();
    });
    this.live.add(ptr);
    return {
      ptr,
      release: () => {
        if (this.live.delete(ptr)) unregisterCallback(ptr);
      },
    };
  }

  /** Announces `count` calls of registered functions about to come (a graph launch with host nodes). */
  expect(count: number): void {
    this.unrun += count;
  }

  /** Releases every registration still held. */
  dispose(): void {
    for (const ptr of this.live) unregisterCallback(ptr);
    this.live.clear();
  }
}
