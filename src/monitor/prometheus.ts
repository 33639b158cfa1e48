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

/** Renders one sample as Prometheus text. */
export function toPrometheus(sample: MonitorSample): string {
  const m = new Families();
  m.add('gpumem_monitor_info', 'gauge', 'The monitor: backend and host (always 1).', { backend: sample.backend, host: sample.host }, 1);
  m.add('gpumem_monitor_sample_timestamp_seconds', 'gauge', 'When the sample was taken (Unix time).', {}, Date.parse(sample.time) / 1000);
  m.add('gpumem_devices', 'gauge', 'Devices sampled.', {}, sample.devices.length);
  for (const d of sample.devices) {
    const l = { device: d.index, name: d.name, source: d.source };
    m.add('gpumem_device_memory_total_bytes', 'gauge', 'Total device memory.', l, d.totalBytes);
    m.add('gpumem_device_memory_used_bytes', 'gauge', 'Device memory in use (all processes).', l, d.usedBytes);
    m.add('gpumem_device_memory_free_bytes', 'gauge', 'Free device memory.', l, d.freeBytes);
    m.add('gpumem_device_memory_reserved_bytes', 'gauge', 'Device memory the driver and firmware set aside (neither used nor free).', l, d.reservedBytes);
    if (d.processes) {
      m.add('gpumem_device_processes', 'gauge', 'Processes holding memory on the device.', { device: d.index }, d.processes.length);
      for (const p of d.processes) {
        m.add('gpumem_process_memory_used_bytes', 'gauge', 'Device memory held by a process.', { device: d.index, pid: p.pid, process: p.name }, p.usedBytes);
      }
    }
  }
  for (const p of sample.pools) {
    const l = { pool: p.name };
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
  }
  return m.text();
}
