/**
 * A monitor sample in Prometheus' text exposition format (version 0.0.4): gauges in base units (bytes, ratios,
 * seconds), counters ending in _total, one HELP and TYPE line per metric family. Values that could not be read are
 * left out rather than written as 0.
 */
import type { MonitorSample } from './monitor.js';

/** The Content-Type of the exposition format. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = Record<string, string | number | undefined>;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}="${escapeLabel(String(v))}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

function value(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  return String(n);
}

class Families {
  private readonly order: string[] = [];
  private readonly families = new Map<string, { help: string; type: 'gauge' | 'counter'; lines: string[] }>();

  add(name: string, type: 'gauge' | 'counter', help: string, labels: Labels, v: number | undefined): void {
    if (v === undefined) return;
    let f = this.families.get(name);
    if (!f) {
      f = { help, type, lines: [] };
      this.families.set(name, f);
      this.order.push(name);
    }
    f.lines.push(`${name}${labelText(labels)} ${value(v)}`);
  }

  text(): string {
    const out: string[] = [];
    for (const name of this.order) {
      const f = this.families.get(name)!;
      out.push(`# HELP ${name} ${f.help}`, `# TYPE ${name} ${f.type}`, ...f.lines);
    }
    return `${out.join('\n')}\n`;
  }
}

const STATES = { ok: 0, warning: 1, critical: 2 } as const;

/**
 * Renders one sample as Prometheus text. Every series carries `hostname`, device series the GPU's `uuid` and
 * `vendor` too, so that one Prometheus can gather a cluster's nodes and tell their GPUs apart.
 */
export function toPrometheus(sample: MonitorSample): string {
  const m = new Families();
  const hostname = sample.host;
  m.add('gpumem_monitor_info', 'gauge', 'The monitor: backend and host (always 1).', { hostname, backend: sample.backend }, 1);
  m.add('gpumem_monitor_sample_timestamp_seconds', 'gauge', 'When the sample was taken (Unix time).', { hostname }, Date.parse(sample.time) / 1000);
  m.add('gpumem_devices', 'gauge', 'Devices sampled.', { hostname }, sample.devices.length);
  for (const d of sample.devices) {
    const l = { hostname, device: d.index, uuid: d.uuid, vendor: d.vendor, name: d.name, source: d.source };
    m.add('gpumem_device_memory_total_bytes', 'gauge', 'Total device memory.', l, d.totalBytes);
    m.add('gpumem_device_memory_used_bytes', 'gauge', 'Device memory in use (all processes).', l, d.usedBytes);
    m.add('gpumem_device_memory_free_bytes', 'gauge', 'Free device memory.', l, d.freeBytes);
    m.add('gpumem_device_memory_reserved_bytes', 'gauge', 'Device memory the driver and firmware set aside (neither used nor free).', l, d.reservedBytes);
    m.add(
      'gpumem_device_memory_growth_bytes_per_second',
      'gauge',
      'Growth of used device memory over the forecast window (least squares).',
      l,
      d.forecast.growthBytesPerSecond,
    );
    m.add(
      'gpumem_device_time_to_oom_seconds',
      'gauge',
      'Seconds until the device is full at the current growth (absent when not growing).',
      l,
      d.forecast.timeToFullSeconds,
    );
    m.add(
      'gpumem_device_memory_state',
      'gauge',
      'Memory state: 0 ok, 1 warning, 2 critical (used fraction or time to out-of-memory past its threshold).',
      l,
      STATES[d.forecast.state],
    );
    m.add(
      'gpumem_device_utilization_ratio',
      'gauge',
      'Share of the last sample period a kernel ran (NVML, ROCm SMI).',
      l,
      d.utilizationPercent === undefined ? undefined : d.utilizationPercent / 100,
    );
    m.add('gpumem_device_pcie_tx_bytes_per_second', 'gauge', 'PCIe throughput from the device (NVML).', l, d.pcieTxBytesPerSecond);
    m.add('gpumem_device_pcie_rx_bytes_per_second', 'gauge', 'PCIe throughput to the device (NVML).', l, d.pcieRxBytesPerSecond);
    if (d.processes) {
      const pl = { hostname, device: d.index, uuid: d.uuid, vendor: d.vendor };
      m.add('gpumem_device_processes', 'gauge', 'Processes holding memory on the device.', pl, d.processes.length);
      for (const p of d.processes) {
        m.add('gpumem_process_memory_used_bytes', 'gauge', 'Device memory held by a process.', { ...pl, pid: p.pid, process: p.name }, p.usedBytes);
      }
    }
  }
  for (const p of sample.pools) {
    const device = sample.devices.find((d) => d.index === p.device);
    const l = { hostname, pool: p.name, device: p.device, uuid: device?.uuid, vendor: device?.vendor };
    m.add('gpumem_pool_reserved_bytes', 'gauge', 'Memory a caching pool holds from its upstream.', l, p.reservedBytes);
    m.add('gpumem_pool_allocated_bytes', 'gauge', 'Rounded sizes of live pool allocations.', l, p.allocatedBytes);
    m.add('gpumem_pool_requested_bytes', 'gauge', 'Sizes callers asked for, of live pool allocations.', l, p.requestedBytes);
    m.add('gpumem_pool_peak_reserved_bytes', 'gauge', 'Peak of reserved bytes since the pool was made.', l, p.peakReservedBytes);
    m.add('gpumem_pool_free_bytes', 'gauge', "Free bytes inside the pool's segments.", l, p.freeBytes);
    m.add('gpumem_pool_largest_free_block_bytes', 'gauge', 'The largest free block in the pool.', l, p.largestFreeBlockBytes);
    m.add('gpumem_pool_fragmentation_ratio', 'gauge', '1 - largest free block / free bytes.', l, p.fragmentation);
    m.add('gpumem_pool_segments', 'gauge', 'Segments the pool holds.', l, p.segments);
    m.add('gpumem_pool_cache_hits_total', 'counter', "Allocations served from the pool's cache.", l, p.cacheHits);
    m.add('gpumem_pool_cache_misses_total', 'counter', 'Allocations that needed the upstream resource.', l, p.cacheMisses);
    m.add('gpumem_pool_growth_bytes_per_second', 'gauge', "Growth of the pool's reserved bytes over the forecast window.", l, p.forecast.growthBytesPerSecond);
    m.add(
      'gpumem_pool_time_to_oom_seconds',
      'gauge',
      "Seconds until the pool's device is full at the pool's growth (absent when not growing).",
      l,
      p.forecast.timeToFullSeconds,
    );
    m.add('gpumem_pool_memory_state', 'gauge', 'Memory state of the pool: 0 ok, 1 warning, 2 critical.', l, STATES[p.forecast.state]);
  }
  return m.text();
}
