/** The terminal view of a monitor sample: one frame of text, redrawn by the CLI at each interval. */
import { formatBytes } from '../units.js';
import type { MonitorSample } from '../monitor/monitor.js';
import { DEFAULT_WIDTH, fitTable, wrapLine, type Column } from './width.js';

function meter(fraction: number, width: number): string {
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

const DEVICE_COLUMNS: Column[] = [
  { header: 'device' },
  { header: 'name', priority: 5 },
  { header: 'used', right: true },
  { header: 'total', right: true },
  { header: 'free', right: true, priority: 4 },
  { header: 'use' },
  { header: 'busy', right: true, priority: 2 },
  { header: 'processes', right: true, priority: 3 },
  { header: 'to OOM', right: true, priority: 6 },
  { header: 'state' },
  { header: 'source', priority: 1 },
];
const PROCESS_COLUMNS: Column[] = [{ header: 'device' }, { header: 'pid', right: true }, { header: 'process', priority: 1 }, { header: 'used', right: true }];
const POOL_COLUMNS: Column[] = [
  { header: 'pool' },
  { header: 'reserved', right: true },
  { header: 'allocated', right: true },
  { header: 'requested', right: true, priority: 3 },
  { header: 'peak reserved', right: true, priority: 4 },
  { header: 'fragmentation', right: true, priority: 5 },
  { header: 'segments', right: true, priority: 2 },
  { header: 'hits', right: true, priority: 1 },
  { header: 'misses', right: true, priority: 1 },
  { header: 'to OOM', right: true, priority: 6 },
  { header: 'state' },
];

/**
 * Renders one frame: devices with their use, the processes on each, and the pools handed to the monitor, no wider
 * than `width` columns (the least important columns give way first; `q` or Ctrl-C stops an interactive view).
 */
export function renderFrame(sample: MonitorSample, options: { interactive?: boolean; width?: number } = {}): string {
  const width = options.width ?? DEFAULT_WIDTH;
  const out: string[] = [];
  const table = (columns: Column[], rows: string[][]): string[] => fitTable(columns, rows, width).lines;
  const bar = (fraction: number): string => meter(fraction, width < 100 ? 10 : 20);
  const title = `gpumem monitor  ${sample.host}  backend ${sample.backend}  ${sample.time}`;
  const hint = '(q or Ctrl-C to stop)';
  if (!options.interactive) out.push(title);
  else if (title.length + 2 + hint.length <= width) out.push(`${title}  ${hint}`);
  else out.push(title, hint);
  if (sample.backend === 'host') out.push(...wrapLine('(the host backend: CPU memory standing in for a GPU; no figure here is a GPU figure)', width));
  if (sample.notice) out.push(...wrapLine(sample.notice, width));
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
    out.push(...table(DEVICE_COLUMNS, rows));
    const notes = sample.devices.filter((d) => d.note).flatMap((d) => wrapLine(`  device ${d.index}: ${d.note}`, width, '    '));
    if (notes.length) out.push('', 'notes:', ...notes);
    const procRows = sample.devices.flatMap((d) =>
      (d.processes ?? []).map((p) => [String(d.index), String(p.pid), p.name ?? '?', p.usedBytes === undefined ? 'n/a' : formatBytes(p.usedBytes)]),
    );
    if (procRows.length) out.push('', ...table(PROCESS_COLUMNS, procRows));
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
    out.push('', ...table(POOL_COLUMNS, rows));
  }
  return `${out.join('\n')}\n`;
}
