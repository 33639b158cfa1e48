/**
 * A test hook for deterministic tests of aborts and disposal: holds a stager's n-th device copy until released, so a
 * test acts at a known point of a transfer instead of racing it with timers.
 */
import type { Stager } from './stager.js';

/** A hold on a stager's device copies. */
export interface CopyHold {
  /** Resolves when the engine reaches the held copy (it waits there). */
  readonly reached: Promise<void>;
  /** Lets the held copy (and every later one) go on. */
  release(): void;
}

/**
 * Holds the `nth` device copy (1-based, counted from now) of `stager` until `release()`.
 * @internal
 */
export function holdDeviceCopy(stager: Stager, nth = 1): CopyHold {
  let seen = 0;
  let arrive: () => void = () => {};
  let go: () => void = () => {};
  const reached = new Promise<void>((r) => {
    arrive = r;
  });
  const released = new Promise<void>((r) => {
    go = r;
  });
  stager.flow.beforeDeviceCopy = () => {
    if (++seen !== nth) return seen > nth ? released : undefined;
    arrive();
    return released;
  };
  return {
    reached,
    release: () => {
      go();
      stager.flow.beforeDeviceCopy = undefined;
    },
  };
}
