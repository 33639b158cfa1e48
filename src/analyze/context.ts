/**
 * What the rules share, computed once per trace: each copy's host memory kind, the copy engine's fixed cost per
 * direction as this trace shows it, kernel busy time per device, runtime calls by correlation and per thread.
 */
import type { CopyRates } from './bandwidth.js';
import { coveredWithin, unionOf, type Union } from './intervals.js';
import { Api, Direction, MemKind, type TraceModel } from './model.js';
import { formatNs } from '../units.js';

export class AnalysisContext {
  readonly copyCount: number;
  /** The host side's MemKind for HtoD / DtoH copies; MemKind.device for the others. */
  readonly hostKind: Uint8Array;
  /**
   * The fixed cost any copy pays here, per direction: the shortest copy of at most 64 KiB in this trace (0 where
   * the trace has no small copy in that direction; floorKnown says which).
   */
  readonly floorNs: Float64Array;
  readonly floorKnown: boolean[];
  readonly kernelBusy = new Map<number, Union>();
  readonly allKernels: Union;
  readonly runtimeByCorrelation = new Map<number, number>();
  readonly span: [number, number];

  constructor(
    readonly model: TraceModel,
    readonly rates: CopyRates,
  ) {
    const c = model.copies;
    this.copyCount = c.length;
    this.hostKind = new Uint8Array(c.length);
    this.floorNs = new Float64Array(6).fill(Infinity);
    for (let i = 0; i < c.length; i++) {
      const dir = c.get(i, 'dir');
      this.hostKind[i] = dir === Direction.HtoD ? c.get(i, 'src') : dir === Direction.DtoH ? c.get(i, 'dst') : MemKind.device;
      const d = c.get(i, 'end') - c.get(i, 'start');
      if (c.get(i, 'bytes') <= 64 * 1024 && d < this.floorNs[dir]!) this.floorNs[dir] = d;
    }
    this.floorKnown = Array.from(this.floorNs, (f) => f !== Infinity);
    for (let d = 0; d < 6; d++) if (this.floorNs[d] === Infinity) this.floorNs[d] = 0;
    const k = model.kernels;
    const devices = new Set<number>();
    for (let i = 0; i < k.length; i++) devices.add(k.get(i, 'device'));
    for (const dev of devices)
      this.kernelBusy.set(
        dev,
        unionOf(k.col('start'), k.col('end'), (i) => k.get(i, 'device') === dev),
      );
    this.allKernels = unionOf(k.col('start'), k.col('end'));
    const r = model.runtime;
    for (let i = 0; i < r.length; i++) {
      const corr = r.get(i, 'correlation');
      if (!Number.isNaN(corr)) this.runtimeByCorrelation.set(corr, i);
    }
    this.span = model.span();
  }

  private gpuWork: Union | undefined;

  /** How much of [a, b] any GPU spent running a kernel, copy or memset. */
  gpuBusyWithin(a: number, b: number): number {
    if (!this.gpuWork) {
      const m = this.model;
      const starts = Float64Array.from([...m.kernels.col('start'), ...m.copies.col('start'), ...m.memsets.col('start')]);
      const ends = Float64Array.from([...m.kernels.col('end'), ...m.copies.col('end'), ...m.memsets.col('end')]);
      this.gpuWork = unionOf(starts, ends);
    }
    return coveredWithin(this.gpuWork, a, b);
  }

  get spanNs(): number {
    return this.span[1] - this.span[0];
  }

  /**
   * Pinned copy rate for a direction in bytes per ns (numerically GB/s, with GB = 1e9): the other direction's where
   * only that one has a figure, NaN where neither has (no catalogue device and no sized host copy).
   */
  pinnedRate(dir: number): number {
    const [own, other] = dir === Direction.DtoH ? [this.rates.DtoH, this.rates.HtoD] : [this.rates.HtoD, this.rates.DtoH];
    return own ?? other ?? Number.NaN;
  }

  /** How the fixed cost of a copy in `dir` was found, for savingHow texts. */
  floorText(dir: number): string {
    return this.floorKnown[dir]
      ? `the fixed cost of a copy here (the shortest copy of 64 KiB or less in this trace, ${formatNs(this.floorNs[dir]!)})`
      : 'no fixed cost (the trace has no copy of 64 KiB or less in this direction to measure it by, so the saving is high by a few µs per copy)';
  }

  /**
   * What copy i would take from pinned memory at the stated rate: the fixed cost plus bytes over bandwidth; its own
   * time where there is no rate, so that no saving is claimed without one.
   */
  pinnedTimeNs(i: number): number {
    const c = this.model.copies;
    const dir = c.get(i, 'dir');
    const t = this.floorNs[dir]! + c.get(i, 'bytes') / this.pinnedRate(dir);
    return Number.isFinite(t) ? t : c.get(i, 'end') - c.get(i, 'start');
  }

  /** Time of copy i during which a kernel ran on its device. */
  overlapNs(i: number): number {
    const c = this.model.copies;
    const u = this.kernelBusy.get(c.get(i, 'device'));
    return u ? coveredWithin(u, c.get(i, 'start'), c.get(i, 'end')) : 0;
  }

  /** Host time of the runtime call that issued copy i (0 when the trace does not link them). */
  issueNs(i: number): number {
    const corr = this.model.copies.get(i, 'correlation');
    const r = Number.isNaN(corr) ? undefined : this.runtimeByCorrelation.get(corr);
    return r === undefined ? 0 : this.model.runtime.get(r, 'end') - this.model.runtime.get(r, 'start');
  }

  /**
   * Names an API for this trace's GPU: the CUDA name for an NVIDIA trace, the HIP name for an AMD one, both where
   * the trace does not say whose GPU it ran on.
   */
  api(cuda: string, hip: string): string {
    const v = this.model.vendor();
    return v === 'nvidia' ? cuda : v === 'amd' ? hip : `${cuda} / ${hip}`;
  }

  /** True for runtime calls that block the host until the device catches up. */
  static isBlocking(api: number): boolean {
    return api === Api.streamSync || api === Api.deviceSync || api === Api.eventSync || api === Api.memcpySync;
  }
}
