/** The terminal view of a monitor sample: one frame of text, redrawn by the CLI at each interval. */
import { formatBytes } from '../units.js';
import type { MonitorSample } from '../monitor/monitor.js';

function pad(s: string, n: number, right = false): string {
  return right ? s.padStart(n) : s.padEnd(n);
}

function table(headers: string[], rows: string[][], rightAligned: ReadonlySet<number>): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => pad(c, widths[i]!, rightAligned.has(i)))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

function bar(fraction: number, width = 20): string {
  const f = Math.min(1, Math.max(0, fraction));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}]`;
}

/** Seconds as a short duration ("45 s", "12 min", "3.2 h"); "-" when absent (not growing). */
export function formatDuration(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '-';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} d`;
}

/** Renders one frame: devices with their use, the processes on each, and the pools handed to the monitor. */
export function renderFrame(sample: MonitorSample, options: { interactive?: boolean } = {}): string {
  const out: string[] = [];
  out.push(`gpumem monitor  ${sample.host}  backend ${sample.backend}  ${sample.time}${options.interactive ? '  (Ctrl-C to stop)' : ''}`);
  if (sample.backend === 'host') out.push('(the host backend: CPU memory standing in for a GPU; no figure here is a GPU figure)');
  if (sample.notice) out.push(sample.notice);
  out.push('');
  if (sample.devices.length) {
    const rows = sample.devices.map((d) => [
      String(d.index),
      d.name ?? '',
      formatBytes(d.usedBytes),
      formatBytes(d.totalBytes),
      formatBytes(d.freeBytes),
      `${bar(d.totalBytes > 0 ? d.usedBytes / d.totalBytes : 0)} ${d.totalBytes > 0 ? ((100 * d.usedBytes) / d.totalBytes).toFixed(1) : '0.0'}%`,
      d.utilizationPercent === undefined ? 'n/a' : `${d.utilizationPercent}%`,
      d.processes ? String(d.processes.length) : 'n/a',
      formatDuration(d.forecast.timeToFullSeconds),
      d.forecast.state,
      d.source,
    ]);
    out.push(...table(['device', 'name', 'used', 'total', 'free', 'use', 'busy', 'processes', 'to OOM', 'state', 'source'], rows, new Set([2, 3, 4, 6, 7, 8])));
    const notes = sample.devices.filter((d) => d.note).map((d) => `  device ${d.index}: ${d.note}`);
    if (notes.length) out.push('', 'notes:', ...notes);
    const procRows = sample.devices.flatMap((d) =>
      (d.processes ?? []).map((p) => [String(d.index), String(p.pid), p.name ?? '?', p.usedBytes === undefined ? 'n/a' : formatBytes(p.usedBytes)]),
    );
    if (procRows.length) out.push('', ...table(['device', 'pid', 'process', 'used'], procRows, new Set([1, 3])));
  }
  if (sample.pools.length) {
    const rows = sample.pools.map((p) => [
      p.name,
      formatBytes(p.reservedBytes),
      formatBytes(p.allocatedBytes),
      formatBytes(p.requestedBytes),
      formatBytes(p.peakReservedBytes),
      p.fragmentation.toFixed(3),
      String(p.segments),
      String(p.cacheHits),
      String(p.cacheMisses),
      formatDuration(p.forecast.timeToFullSeconds),
      p.forecast.state,
    ]);
    out.push(
      '',
      ...table(
        ['pool', 'reserved', 'allocated', 'requested', 'peak reserved', 'fragmentation', 'segments', 'hits', 'misses', 'to OOM', 'state'],
        rows,
        new Set([1, 2, 3, 4, 5, 6, 7, 8, 9]),
      ),
    );
  }
  return `${out.join('\n')}\n`;
}
