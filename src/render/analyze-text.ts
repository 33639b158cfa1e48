/** `gpumem analyze`: the text rendering of an analysis. */
import type { AnalyzeResult } from '../analyze/result.js';
import { formatBytes, formatNs } from '../units.js';
import { table } from './text.js';
import { fitLines } from './width.js';

/** `s` cut to `n` characters, marked where it was cut. */
const cut = (s: string, n: number): string => (s.length <= n ? s : `${s.slice(0, Math.max(1, n - 1))}…`);

const orNa = (v: number | null, f: (x: number) => string): string => (v === null ? 'n/a' : f(v));

export const PER_DEVICE_HEADERS = ['GPU', '>span', '>kernels', '>kernel time', '>busy', '>copies', '>copy bytes', '>copy time'] as const;

/** One row per GPU of a trace of several (the text table and the page's). */
export function perDeviceRows(s: AnalyzeResult['summary']): Array<Array<string | number>> {
  return s.perDevice.map((d) => [
    d.name ? `${d.device}: ${d.name}` : d.device,
    formatNs(d.spanNs),
    d.kernels.count,
    formatNs(d.kernels.timeNs),
    d.busyFraction === null ? 'n/a' : `${(100 * d.busyFraction).toFixed(1)}%`,
    d.copies.count,
    orNa(d.copies.bytes, (b) => formatBytes(b)),
    formatNs(d.copies.timeNs),
  ]);
}

/** "pinned HtoD 55.5 GB/s, DtoH 55.4 GB/s — where from", or what is missing. */
export function ratesText(r: AnalyzeResult['summary']['rates']): string {
  const gbps = (v: number | null): string => (v === null ? 'none' : `${v} GB/s`);
  return `pinned HtoD ${gbps(r.HtoD)}, DtoH ${gbps(r.DtoH)} — ${r.source}`;
}

/** The analysis as text, no wider than `width` where given (tables give up columns or cut names, prose wraps). */
export function renderAnalyze(r: AnalyzeResult, options: { width?: number } = {}): string {
  const width = options.width;
  const s = r.summary;
  const out: string[] = [];
  out.push(`trace: ${s.files.join(', ')} (${s.formats.join(', ')})`);
  if (s.devices.length) out.push(`devices: ${s.devices.map((d) => `${d.id}: ${d.name}`).join('; ')}`);
  out.push(
    s.spanNs === 0 && s.aggregates
      ? `span: none (the trace kept totals, no times); kernels: ${s.kernels.count} (${formatNs(s.kernels.timeNs)}); memsets: ${s.memsets.count}`
      : `span: ${s.spanNs > 0 ? formatNs(s.spanNs) : 'not recorded'}; kernels: ${s.kernels.count} (${formatNs(s.kernels.timeNs)}, GPU busy ${formatNs(s.kernels.busyNs)}); memsets: ${s.memsets.count}`,
  );
  if (s.perDevice.length > 0) {
    out.push(`per GPU (${s.perDevice.length} GPUs; the figures above are their sums):`);
    out.push(table([...PER_DEVICE_HEADERS], perDeviceRows(s), { width, priorities: [undefined, 2, 5, 3, 6, 4, 1, 2] }));
  }
  out.push('');
  if (s.copies.count > 0) {
    out.push('copies (GB/s = 1e9 bytes per second of copy-engine time):');
    out.push(
      table(
        ['direction', 'host memory', '>copies', '>bytes', '>time', '>achieved'],
        s.copies.groups.map((g) => [
          g.direction,
          g.direction === 'HtoD' || g.direction === 'DtoH' ? g.hostKind : '-',
          g.count,
          orNa(g.bytes, (b) => formatBytes(b)),
          formatNs(g.timeNs),
          orNa(g.achievedGBps, (x) => `${x.toFixed(2)} GB/s`),
        ]),
        { width },
      ),
    );
    out.push(
      `overlap with kernels: ${s.copies.overlapFraction === null ? 'n/a (no kernels)' : `${(100 * s.copies.overlapFraction).toFixed(1)}% of copy time (${formatNs(s.copies.overlappedWithKernelsNs)})`}`,
    );
  } else out.push('copies: none recorded');
  const sy = s.syncs;
  out.push(
    `host synchronisation: ${sy.streamSync} stream, ${sy.deviceSync} device, ${sy.eventSync} event, ${sy.memcpySync} synchronous copies; host blocked ${formatNs(sy.hostBlockedNs)}`,
  );
  const a = s.allocations;
  const alloc = [`${a.mallocCalls} device alloc / ${a.freeCalls} free calls`, `${a.hostAllocCalls} pinned alloc / ${a.hostFreeCalls} free calls`];
  if (a.managedAllocCalls) alloc.push(`${a.managedAllocCalls} managed`);
  if (a.vmmMapCalls + a.vmmUnmapCalls) alloc.push(`${a.vmmMapCalls} map / ${a.vmmUnmapCalls} unmap calls (virtual memory)`);
  if (a.driverAllocEvents) alloc.push(`${a.driverAllocEvents} driver allocation events`);
  if (a.frameworkAllocEvents) alloc.push(`${a.frameworkAllocEvents} allocator (tensor) allocations`);
  if (a.peakReservedBytes !== null) alloc.push(`peak ${formatBytes(a.peakAllocatedBytes ?? 0)} allocated / ${formatBytes(a.peakReservedBytes)} reserved`);
  if (a.segments)
    alloc.push(`${a.segments.count} segments: ${formatBytes(a.segments.reservedBytes)} reserved, ${formatBytes(a.segments.allocatedBytes)} allocated`);
  if (a.ooms) alloc.push(`${a.ooms} OOM events`);
  out.push(`allocations: ${alloc.join('; ')}`);
  if (s.migrations.length > 0) {
    const n = s.migrations.reduce((t, g) => t + g.count, 0);
    const bytes = s.migrations.reduce((t, g) => t + g.bytes, 0);
    const ns = s.migrations.reduce((t, g) => t + g.timeNs, 0);
    out.push(
      `unified-memory migrations (the driver moving managed pages, not the program's copies): ${n}, ${formatBytes(bytes)} in ${formatNs(ns)}: ${s.migrations.map((g) => `${g.count} ${g.cause} ${g.direction}`).join(', ')}`,
    );
  }
  if (s.faults.gpu === null || s.faults.cpu === null) {
    if (s.migrations.length > 0 || a.managedAllocCalls > 0) out.push('managed memory page faults: not recorded');
  } else if (s.faults.gpu + s.faults.cpu > 0) out.push(`managed memory page faults: ${s.faults.gpu} GPU, ${s.faults.cpu} CPU`);
  if (s.aggregates) {
    out.push('');
    out.push('aggregate statistics (the trace kept totals, not events):');
    const rows = [
      ...s.aggregates.copies.map((c) => [`copy ${c.direction}`, c.calls, formatNs(c.totalNs)]),
      ...s.aggregates.apis.map((x) => [x.name, x.calls, formatNs(x.totalNs)]),
      ...s.aggregates.kernels.map((x) => [`kernel ${x.name}`, x.calls, formatNs(x.totalNs)]),
      ...s.aggregates.memsets.map((x) => [`fill ${x.name}`, x.calls, formatNs(x.totalNs)]),
    ];
    // names (kernel names run to hundreds of characters) cut to what the line leaves beside the two figures
    const nameRoom = width === undefined ? Number.POSITIVE_INFINITY : Math.max(20, width - 2 * 2 - 8 - 12);
    out.push(
      table(
        ['name', '>calls', '>total time'],
        rows.map(([n, ...rest]) => [cut(String(n), nameRoom), ...rest]),
      ),
    );
  }
  out.push(`copy rates for savings: ${ratesText(s.rates)}`);
  for (const n of s.notes) out.push(`note: ${n}`);
  out.push('');
  if (r.findings.length === 0)
    out.push(
      s.notApplicable.length > 0
        ? `findings: none among the rules that could judge this trace (${s.notApplicable.length} could not: see "not judged" below)`
        : 'findings: none — no rule found a memory problem in this trace',
    );
  else {
    out.push(`findings (${r.findings.length}, largest saving first):`);
    for (const [i, f] of r.findings.entries()) {
      out.push('');
      out.push(`${i + 1}. [${f.severity}] ${f.rule}: ${f.title}`);
      out.push(
        `   ${f.count} events${f.bytes !== null ? `, ${formatBytes(f.bytes)}` : ''}${f.timeNs > 0 ? `, ${formatNs(f.timeNs)}` : ''}; saves about ${f.estimatedSavingNs > 0 ? formatNs(f.estimatedSavingNs) : 'no time (see below)'}`,
      );
      for (const e of f.evidence) out.push(`   - ${e}`);
      out.push(`   saving: ${f.savingHow}`);
      if (f.overlapsWith.length > 0) out.push(`   overlaps: ${f.overlapsWith.join(', ')} (savings resting on the same time: not additive)`);
      out.push(`   change: ${f.change}`);
    }
  }
  if (s.notApplicable.length) {
    out.push('');
    // rules that could not judge for one reason are listed together
    const byReason = new Map<string, string[]>();
    for (const n of s.notApplicable) byReason.set(n.reason, [...(byReason.get(n.reason) ?? []), n.rule]);
    for (const [reason, rules] of byReason) out.push(`not judged: ${rules.join(', ')} — ${reason}`);
  }
  return fitLines(out.join('\n'), width);
}
