/**
 * Live memory per device and per process, and of the caching pools a program hands in: one sample at a time, with a
 * bounded history for the dashboard. The terminal view, the web dashboard and the Prometheus exporter all read
 * these samples. A value that cannot be read is absent, never 0.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { DeviceMemoryUse } from '../backend/backend.js';
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Runtime } from '../runtime/runtime.js';
import type { PoolStats } from '../pool/stats.js';

/** A process holding memory on a device. */
export interface ProcessSample {
  pid: number;
  /** The process's command name (/proc/PID/comm), when this machine can read it. */
  name?: string;
  usedBytes?: number;
}

/** How close memory is to running out: the used fraction and the time left at the current growth, against thresholds. */
export type MemoryState = 'ok' | 'warning' | 'critical';

/** A forecast of running out of memory, from the growth of used (or reserved) bytes over the recent samples. */
export interface Forecast {
  /** Bytes per second over the window (least squares); absent with fewer than three samples in it. */
  growthBytesPerSecond?: number;
  /** Seconds until the device is full at that growth; absent when memory is not growing. */
  timeToFullSeconds?: number;
  state: MemoryState;
}

/** One device's memory at the time of the sample. */
export interface DeviceSample {
  index: number;
  name?: string;
  /** Stable across machines: NVML's UUID, ROCm SMI's unique id, or the host device's made-up one. */
  uuid?: string;
  /** nvidia, amd or host. */
  vendor: 'nvidia' | 'amd' | 'host';
  /** Percent of the last sample period a kernel ran, where the management library gives it. */
  utilizationPercent?: number;
  pcieTxBytesPerSecond?: number;
  pcieRxBytesPerSecond?: number;
  forecast: Forecast;
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  /** Set aside by the driver and firmware (neither used nor free), where known. */
  reservedBytes?: number;
  /** nvml, amd-smi, rocm-smi, runtime (memGetInfo) or host. */
  source: DeviceMemoryUse['source'];
  note?: string;
  /** Absent where the backend cannot list processes. */
  processes?: ProcessSample[];
}

/** A caching pool handed to the monitor, by the name it was given. */
export interface PoolSample {
  name: string;
  /** The device whose free memory the pool grows into (for its forecast). */
  device: number;
  /** When the device runs out at the growth of this pool's reserved bytes. */
  forecast: Forecast;
  reservedBytes: number;
  allocatedBytes: number;
  requestedBytes: number;
  peakReservedBytes: number;
  freeBytes: number;
  largestFreeBlockBytes: number;
  /** 1 − largest free block / free bytes. */
  fragmentation: number;
  segments: number;
  cacheHits: number;
  cacheMisses: number;
}

/** One sample (schema gpumem.monitor/1). */
export interface MonitorSample {
  schema: 'gpumem.monitor/1';
  /** ISO 8601 time of the sample. */
  time: string;
  host: string;
  backend: string;
  devices: DeviceSample[];
  pools: PoolSample[];
  /** Why there is no device, when there is none. */
  notice?: string;
}

/** Anything with a pool's statistics (CachingPool). */
export interface PoolLike {
  stats(): PoolStats;
}

/** When a device or pool is marked warning or critical. */
export interface Thresholds {
  /** Used fraction of the device (default 0.90 warning, 0.97 critical). */
  warningFraction: number;
  criticalFraction: number;
  /** Seconds to full at the current growth (default 900 warning, 120 critical). */
  warningSeconds: number;
  criticalSeconds: number;
  /** The growth is fitted over the samples of the last this many seconds (default 300). */
  windowSeconds: number;
}

export const DEFAULT_THRESHOLDS: Thresholds = { warningFraction: 0.9, criticalFraction: 0.97, warningSeconds: 900, criticalSeconds: 120, windowSeconds: 300 };

export interface MonitorOptions {
  /** Devices to sample (default: all). */
  devices?: readonly number[];
  /** Pools to report, by name. */
  pools?: Record<string, PoolLike>;
  /** Samples kept for the dashboard's chart (default 600). */
  historySize?: number;
  /** When to warn (defaults: DEFAULT_THRESHOLDS). */
  thresholds?: Partial<Thresholds>;
  /** Called with every sample as it is taken (the CLI's --log writes it to disk). */
  onSample?: ((sample: MonitorSample) => void) | undefined;
  /** The clock samples are stamped with, in milliseconds since the epoch (default Date.now; tests pass their own). */
  now?: () => number;
}

/**
 * Least-squares growth of `value` over the points of the last `windowSeconds`, and the seconds until it has grown by
 * `room` bytes; nothing when fewer than three points span the window or the value does not grow.
 */
export function growth(points: ReadonlyArray<{ t: number; value: number }>, room: number, windowSeconds: number): Omit<Forecast, 'state'> {
  const last = points[points.length - 1];
  if (!last) return {};
  const recent = points.filter((p) => last.t - p.t <= windowSeconds);
  if (recent.length < 3) return {};
  const n = recent.length;
  const mt = recent.reduce((s, p) => s + p.t, 0) / n;
  const mv = recent.reduce((s, p) => s + p.value, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of recent) {
    num += (p.t - mt) * (p.value - mv);
    den += (p.t - mt) ** 2;
  }
  if (den === 0) return {};
  const slope = num / den;
  return slope > 0 ? { growthBytesPerSecond: slope, timeToFullSeconds: Math.max(0, room) / slope } : { growthBytesPerSecond: slope };
}

/** The state of a device (or pool) from its used fraction and its time to full. */
export function stateOf(usedFraction: number, timeToFullSeconds: number | undefined, t: Thresholds): MemoryState {
  const ttf = timeToFullSeconds ?? Infinity;
  if (usedFraction >= t.criticalFraction || ttf <= t.criticalSeconds) return 'critical';
  if (usedFraction >= t.warningFraction || ttf <= t.warningSeconds) return 'warning';
  return 'ok';
}

const VENDORS: Record<string, DeviceSample['vendor']> = { cuda: 'nvidia', hip: 'amd', host: 'host' };

function processName(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function poolSample(name: string, device: number, s: PoolStats): PoolSample {
  return {
    name,
    device,
    forecast: { state: 'ok' },
    reservedBytes: s.reservedBytes.current,
    allocatedBytes: s.allocatedBytes.current,
    requestedBytes: s.requestedBytes.current,
    peakReservedBytes: s.reservedBytes.peak,
    freeBytes: s.freeBytes,
    largestFreeBlockBytes: s.largestFreeBlockBytes,
    fragmentation: s.fragmentation,
    segments: s.segmentCount.current,
    cacheHits: s.cacheHits,
    cacheMisses: s.cacheMisses,
  };
}

export class MemoryMonitor {
  private readonly devices: readonly number[];
  private readonly pools = new Map<string, { pool: PoolLike; device: number }>();
  private readonly thresholds: Thresholds;
  private readonly onSample: ((sample: MonitorSample) => void) | undefined;
  private readonly now: () => number;
  private readonly historySize: number;
  private taken = 0;
  private readonly samples: MonitorSample[] = [];

  /**
   * @throws InvalidArgumentError for a device the runtime does not have, or a history size that is not a whole
   * number from 1 to 100000.
   */
  constructor(
    readonly rt: Runtime,
    options: MonitorOptions = {},
  ) {
    const count = rt.devices.length;
    const wanted = options.devices ?? Array.from({ length: count }, (_, i) => i);
    for (const d of wanted) rt.device(d); // validates each index, naming the backend's devices when it fails
    this.devices = [...new Set(wanted)];
    const h = options.historySize ?? 600;
    if (!Number.isInteger(h) || h < 1 || h > 100_000)
      throw new InvalidArgumentError(`historySize must be a whole number from 1 to 100000, got ${String(h)}`, ErrorCode.INVALID_ARGUMENT);
    this.historySize = h;
    this.thresholds = { ...DEFAULT_THRESHOLDS, ...options.thresholds };
    this.onSample = options.onSample;
    this.now = options.now ?? Date.now;
    const t = this.thresholds;
    const ok =
      0 < t.warningFraction &&
      t.warningFraction <= t.criticalFraction &&
      t.criticalFraction <= 1 &&
      0 <= t.criticalSeconds &&
      t.criticalSeconds <= t.warningSeconds &&
      t.windowSeconds > 0;
    if (!ok) {
      const f = (x: number): string => String(+x.toFixed(4));
      throw new InvalidArgumentError(
        `thresholds must satisfy 0 < warning fraction <= critical fraction <= 1, 0 <= critical seconds <= warning seconds and a window above 0; got warning fraction ${f(t.warningFraction)}, critical fraction ${f(t.criticalFraction)}, warning ${f(t.warningSeconds)} s, critical ${f(t.criticalSeconds)} s, window ${f(t.windowSeconds)} s`,
        ErrorCode.INVALID_ARGUMENT,
      );
    }
    for (const [name, pool] of Object.entries(options.pools ?? {})) this.watchPool(name, pool);
  }

  /**
   * Reports a pool's statistics under `name` in every later sample.
   * @throws InvalidArgumentError for an empty name or an object without stats().
   */
  watchPool(name: string, pool: PoolLike, options: { device?: number } = {}): void {
    if (typeof name !== 'string' || name.length === 0) throw new InvalidArgumentError('watchPool: a pool needs a name', ErrorCode.INVALID_ARGUMENT);
    if (typeof (pool as { stats?: unknown })?.stats !== 'function')
      throw new InvalidArgumentError(`watchPool(${name}): expected a pool with stats()`, ErrorCode.INVALID_ARGUMENT);
    const device = options.device ?? this.devices[0] ?? 0;
    if (this.rt.devices.length > 0) this.rt.device(device); // validates the index
    this.pools.set(name, { pool, device });
  }

  unwatchPool(name: string): boolean {
    return this.pools.delete(name);
  }

  /** Samples every device and pool now, and keeps the sample in the history (and the forecasts' window). */
  sample(): MonitorSample {
    const out = this.measure();
    this.samples.push(out);
    this.taken++;
    this.onSample?.(out);
    if (this.samples.length > this.historySize) this.samples.splice(0, this.samples.length - this.historySize);
    return out;
  }

  /**
   * Samples every device and pool now without keeping the sample: the history, the forecasts' window and `onSample`
   * are left as they were (a Prometheus scrape reads the present; it must not change what the dashboard shows).
   */
  peek(): MonitorSample {
    return this.measure();
  }

  /** One sample, its forecasts fitted over the history and itself. */
  private measure(): MonitorSample {
    const out: MonitorSample = {
      schema: 'gpumem.monitor/1',
      time: new Date(this.now()).toISOString(),
      host: hostname(),
      backend: this.rt.backend.name,
      devices: this.devices.map((index) => this.deviceSample(index)),
      pools: [],
    };
    const now = Date.parse(out.time) / 1000;
    for (const d of out.devices) {
      const points = [
        ...this.samples.map((s) => ({ t: Date.parse(s.time) / 1000, value: s.devices.find((x) => x.index === d.index)?.usedBytes })),
        { t: now, value: d.usedBytes },
      ].filter((p): p is { t: number; value: number } => p.value !== undefined);
      const g = growth(points, d.freeBytes, this.thresholds.windowSeconds);
      d.forecast = { ...g, state: stateOf(d.totalBytes > 0 ? d.usedBytes / d.totalBytes : 0, g.timeToFullSeconds, this.thresholds) };
    }
    for (const [name, { pool, device }] of this.pools) {
      const p = poolSample(name, device, pool.stats());
      const points = [
        ...this.samples.map((s) => ({ t: Date.parse(s.time) / 1000, value: s.pools.find((x) => x.name === name)?.reservedBytes })),
        { t: now, value: p.reservedBytes },
      ].filter((x): x is { t: number; value: number } => x.value !== undefined);
      const dev = out.devices.find((x) => x.index === device);
      const g = growth(points, dev?.freeBytes ?? 0, this.thresholds.windowSeconds);
      p.forecast = dev ? { ...g, state: stateOf(dev.usedBytes / Math.max(1, dev.totalBytes), g.timeToFullSeconds, this.thresholds) } : { state: 'ok' };
      out.pools.push(p);
    }
    if (this.rt.devices.length === 0)
      out.notice = `the ${this.rt.backend.name} backend has no device${this.rt.backend.noDeviceReason() ? ` (${this.rt.backend.noDeviceReason()})` : ''}`;
    return out;
  }

  /** Samples taken since the monitor was made (the history keeps the last `historySize` of them). */
  get sampleCount(): number {
    return this.taken;
  }

  /** The samples kept, oldest first. */
  get history(): readonly MonitorSample[] {
    return this.samples;
  }

  /** The most recent sample, if any. */
  get latest(): MonitorSample | undefined {
    return this.samples[this.samples.length - 1];
  }

  private deviceSample(index: number): DeviceSample {
    const u = this.rt.device(index).memoryUse();
    const d: DeviceSample = {
      index,
      vendor: VENDORS[this.rt.backend.name] ?? 'host',
      totalBytes: u.totalBytes,
      freeBytes: u.freeBytes,
      usedBytes: u.usedBytes,
      source: u.source,
      forecast: { state: 'ok' },
    };
    if (u.name !== undefined) d.name = u.name;
    if (u.uuid !== undefined) d.uuid = u.uuid;
    if (u.utilizationPercent !== undefined) d.utilizationPercent = u.utilizationPercent;
    if (u.pcieTxBytesPerSecond !== undefined) d.pcieTxBytesPerSecond = u.pcieTxBytesPerSecond;
    if (u.pcieRxBytesPerSecond !== undefined) d.pcieRxBytesPerSecond = u.pcieRxBytesPerSecond;
    if (u.reservedBytes !== undefined) d.reservedBytes = u.reservedBytes;
    if (u.note !== undefined) d.note = u.note;
    if (u.processes) {
      d.processes = u.processes
        .map((p) => {
          const s: ProcessSample = { pid: p.pid };
          const name = processName(p.pid);
          if (name !== undefined) s.name = name;
          if (p.usedBytes !== undefined) s.usedBytes = p.usedBytes;
          return s;
        })
        .sort((a, b) => (b.usedBytes ?? -1) - (a.usedBytes ?? -1) || a.pid - b.pid);
    }
    return d;
  }
}
