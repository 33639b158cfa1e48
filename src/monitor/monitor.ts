/**
 * Live memory per device and per process, and of the caching pools a program hands in: one sample at a time, with a
 * bounded history for the dashboard. The terminal view, the web dashboard and the Prometheus exporter all read
 * these samples. A value that cannot be read is absent, never 0.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { DeviceMemoryUse } from '../backend/backend.js';
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import type { Runtime } from '../memory/runtime.js';
import type { PoolStats } from '../pool/stats.js';

/** A process holding memory on a device. */
export interface ProcessSample {
  pid: number;
  /** The process's command name (/proc/PID/comm), when this machine can read it. */
  name?: string;
  usedBytes?: number;
}

/** One device's memory at the time of the sample. */
export interface DeviceSample {
  index: number;
  name?: string;
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  /** Set aside by the driver and firmware (neither used nor free), where known. */
  reservedBytes?: number;
  /** nvml, rocm-smi, runtime (memGetInfo) or host. */
  source: DeviceMemoryUse['source'];
  note?: string;
  /** Absent where the backend cannot list processes. */
  processes?: ProcessSample[];
}

/** A caching pool handed to the monitor, by the name it was given. */
export interface PoolSample {
  name: string;
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

export interface MonitorOptions {
  /** Devices to sample (default: all). */
  devices?: readonly number[];
  /** Pools to report, by name. */
  pools?: Record<string, PoolLike>;
  /** Samples kept for the dashboard's chart (default 600). */
  historySize?: number;
}

function processName(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function poolSample(name: string, s: PoolStats): PoolSample {
  return {
    name,
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
  private readonly pools = new Map<string, PoolLike>();
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
    for (const [name, pool] of Object.entries(options.pools ?? {})) this.watchPool(name, pool);
  }

  /**
   * Reports a pool's statistics under `name` in every later sample.
   * @throws InvalidArgumentError for an empty name or an object without stats().
   */
  watchPool(name: string, pool: PoolLike): void {
    if (typeof name !== 'string' || name.length === 0) throw new InvalidArgumentError('watchPool: a pool needs a name', ErrorCode.INVALID_ARGUMENT);
    if (typeof (pool as { stats?: unknown })?.stats !== 'function')
      throw new InvalidArgumentError(`watchPool(${name}): expected a pool with stats()`, ErrorCode.INVALID_ARGUMENT);
    this.pools.set(name, pool);
  }

  unwatchPool(name: string): boolean {
    return this.pools.delete(name);
  }

  /** Samples every device and pool now, and keeps the sample in the history. */
  sample(): MonitorSample {
    const out: MonitorSample = {
      schema: 'gpumem.monitor/1',
      time: new Date().toISOString(),
      host: hostname(),
      backend: this.rt.backend.name,
      devices: this.devices.map((index) => this.deviceSample(index)),
      pools: [...this.pools].map(([name, pool]) => poolSample(name, pool.stats())),
    };
    if (this.rt.devices.length === 0)
      out.notice = `the ${this.rt.backend.name} backend has no device${this.rt.backend.noDeviceReason() ? ` (${this.rt.backend.noDeviceReason()})` : ''}`;
    this.samples.push(out);
    this.taken++;
    if (this.samples.length > this.historySize) this.samples.splice(0, this.samples.length - this.historySize);
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
    const d: DeviceSample = { index, totalBytes: u.totalBytes, freeBytes: u.freeBytes, usedBytes: u.usedBytes, source: u.source };
    if (u.name !== undefined) d.name = u.name;
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
