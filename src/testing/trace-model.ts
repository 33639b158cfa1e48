/**
 * Events for hand-built analyzer traces: the tests of the rules and of what findings may claim build small
 * TraceModels where the expected finding can be worked out by hand. Times are nanoseconds; every event is on device 0,
 * stream 7 unless told otherwise, and NaN stands for "not recorded" as the importers write it.
 */
import { Direction, MemKind, type TraceModel } from '../analyze/model.js';

/**
 * Adds a copy of `bytes` in direction `dir` (a Direction) between device memory and host memory of kind `host` (a
 * MemKind), from `start` for `dur`.
 */
export function copy(
  m: TraceModel,
  start: number,
  dur: number,
  bytes: number,
  dir: number,
  host: number,
  o: { stream?: number; hostAddr?: number; correlation?: number } = {},
): void {
  m.copies.push({
    start,
    end: start + dur,
    bytes,
    dir,
    src: dir === Direction.HtoD ? host : MemKind.device,
    dst: dir === Direction.DtoH ? host : MemKind.device,
    stream: o.stream ?? 7,
    device: 0,
    correlation: o.correlation ?? Number.NaN,
    hostAddr: o.hostAddr ?? Number.NaN,
    op: -1,
  });
}

/** Adds a kernel running from `start` for `dur`. */
export const kernel = (m: TraceModel, start: number, dur: number, stream = 7): void => {
  m.kernels.push({ start, end: start + dur, stream, device: 0 });
};

/** Adds a runtime call of kind `api` (an Api) on thread 1, from `start` for `dur`. */
export const call = (m: TraceModel, start: number, dur: number, api: number, correlation = Number.NaN): void => {
  m.runtime.push({ start, end: start + dur, api, thread: 1, correlation });
};
