/** A monitor sample as CSV: one row per device, with a header line when asked (`gpumem monitor --csv`). */
import type { MonitorSample } from './monitor.js';

const COLUMNS = [
  'time',
  'hostname',
  'backend',
  'device',
  'uuid',
  'vendor',
  'name',
  'total_bytes',
  'used_bytes',
  'free_bytes',
  'utilization_percent',
  'processes',
  'time_to_oom_seconds',
  'state',
  'source',
] as const;

/** Quotes a field when it holds a comma, a quote or a line break (RFC 4180). */
function field(v: string | number | undefined): string {
  if (v === undefined) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(sample: MonitorSample, header: boolean): string {
  const rows = sample.devices.map((d) =>
    [
      sample.time,
      sample.host,
      sample.backend,
      d.index,
      d.uuid,
      d.vendor,
      d.name,
      d.totalBytes,
      d.usedBytes,
      d.freeBytes,
      d.utilizationPercent,
      d.processes?.length,
      d.forecast.timeToFullSeconds === undefined ? undefined : Math.round(d.forecast.timeToFullSeconds),
      d.forecast.state,
      d.source,
    ]
      .map(field)
      .join(','),
  );
  return `${header ? `${COLUMNS.join(',')}\n` : ''}${rows.map((r) => `${r}\n`).join('')}`;
}
