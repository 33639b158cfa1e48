/** Text rendering of a bench report: copies as a size matrix, the other tests as rows. */
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { table } from './text.js';
import { wrapLine } from './width.js';

function sizeLabel(b: number): string {
  return formatBytes(b, 0).replace(' ', '');
}

function gb(r: BenchResult): string {
  return r.medianGBps === undefined ? '-' : r.medianGBps >= 100 ? r.medianGBps.toFixed(0) : r.medianGBps.toFixed(1);
}

function spread(r: BenchResult): string {
  if (r.medianGBps !== undefined) return `${r.minGBps!.toFixed(1)}-${r.maxGBps!.toFixed(1)}`;
  return `${r.minUs!.toFixed(2)}-${r.maxUs!.toFixed(2)}`;
}

/** Copy-like rows as a matrix: one line per (test, direction, kinds, engine), one column per size. */
function matrix(rows: BenchResult[], width: number | undefined): string {
  const sizes = [...new Set(rows.map((r) => r.bytes))].sort((a, b) => a - b);
  const keyOf = (r: BenchResult): string =>
    `${r.test}|${r.direction}|${r.srcKind}->${r.dstKind}|${r.engine}${r.peer !== undefined ? `|to ${r.peer}, peer access ${r.peerAccess ? 'on' : 'off'}` : ''}`;
  const keys = [...new Set(rows.map(keyOf))];
  const body = keys.map((k) => {
    const [test, direction, kinds, engine, peer] = k.split('|');
    const cells = sizes.map((s) => {
      const r = rows.find((x) => keyOf(x) === k && x.bytes === s);
      return r ? gb(r) : '';
    });
    const last = rows.filter((x) => keyOf(x) === k).sort((a, b) => b.bytes - a.bytes)[0]!;
    return [
      `${test} ${direction}${peer ? ` (${peer})` : ''}`,
      kinds!,
      engine!,
      last.counted,
      ...cells,
      last.percentOfPeak !== undefined ? `${last.percentOfPeak}%` : '',
      `${(last.cv * 100).toFixed(1)}%`,
    ];
  });
  // narrow terminals lose the spread first, then how bytes were counted (the header line says it), then the smaller
  // sizes (smallest first) and the share of peak; what tells rows apart (the measure, the memory kinds, the engine)
  // is never dropped but wraps, and the largest size stays
  const sizePriority = sizes.map((_, i) => (i === sizes.length - 1 ? undefined : 3 + i / sizes.length));
  return table(['measure', 'memory', 'engine', 'counted', ...sizes.map((s) => `>${sizeLabel(s)}`), '>of peak', '>cv (largest)'], body, {
    width,
    priorities: [undefined, undefined, undefined, 2, ...sizePriority, 6, 1],
    wrap: [true, true, true],
  });
}

function rowsTable(rows: BenchResult[], latency: boolean, width: number | undefined): string {
  return table(
    ['measure', 'memory', 'engine', '>bytes', latency ? '>median µs' : '>median GB/s', latency ? '>min-max µs' : '>min-max GB/s', '>cv', 'counted', '>of peak'],
    rows.map((r) => [
      `${r.test} ${r.direction}${r.peer !== undefined ? ` (to ${r.peer}, peer access ${r.peerAccess ? 'on' : 'off'})` : ''}`,
      `${r.srcKind}->${r.dstKind}`,
      engineLabel(r),
      sizeLabel(r.bytes),
      latency ? r.medianUs!.toFixed(3) : gb(r),
      spread(r),
      `${(r.cv * 100).toFixed(1)}%`,
      r.counted,
      r.percentOfPeak !== undefined ? `${r.percentOfPeak}%` : '',
    ]),
    // what tells rows apart (the measure, the memory kinds, the engine or API, the size) is never dropped: it wraps
    { width, priorities: [undefined, undefined, undefined, undefined, undefined, 3, 1, 2, 4], wrap: [true, true, true] },
  );
}

/** The bench as text; with a `width`, tables drop their least important columns and prose wraps to fit it. */
export function renderBench(report: BenchReport, options: { width?: number } = {}): string {
  const e = report.environment;
  const width = options.width;
  const out: string[] = [];
  const prose = (line: string, indent?: string): string[] => (width === undefined ? [line] : wrapLine(line, width, indent));
  out.push(
    ...prose(
      `gpumem bench: backend ${e.backend}${e.runtimeVersion ? ` (runtime ${e.runtimeVersion}${e.driverVersion ? `, driver ${e.driverVersion}` : ''})` : ''}, ${e.mode} mode, ${e.seconds} s, ${e.date}`,
    ),
  );
  if (e.interrupted) out.push(...prose('INTERRUPTED: the run was stopped; the rows below are those finished before it.'));
  if (e.backend === 'host') out.push('backend host: these are CPU memory figures, not GPU figures.');
  out.push(...prose('Bandwidth in GB/s (GB = 1e9 bytes): median of the repeats; "counted" says which bytes: one-way, read+write, both directions at once.'));
  for (const d of e.devices) {
    const rows = report.results.filter((r) => r.device === d.index);
    out.push('');
    out.push(
      ...prose(
        `device ${d.index}: ${d.name ?? 'unknown'} (${d.arch ?? '?'})  link ${d.link ? `gen ${d.link.generation} x${d.link.width}` : 'unknown'}  NUMA node ${d.numaNode ?? 'unknown'}`,
        '  ',
      ),
    );
    out.push(
      ...prose(
        `  peaks: ${d.peaks.linkGBps !== undefined ? `link ${d.peaks.linkGBps} GB/s` : 'link unknown'}, ${d.peaks.memoryGBps !== undefined ? `memory ${d.peaks.memoryGBps} GB/s` : 'memory unknown'} (${d.peaks.how})`,
        '    ',
      ),
    );
    const copies = rows.filter((r) => ['copy', 'sm-copy', 'peer'].includes(r.test) && r.medianGBps !== undefined);
    if (copies.length) out.push('', matrix(copies, width));
    const cache = rows.filter((r) => r.test === 'cache');
    if (cache.length) out.push('', 'cache sweep (read bandwidth against working set):', matrix(cache, width));
    const coll = rows.filter((r) => r.test === 'collective');
    if (coll.length) out.push('', collectivesTable(coll, width));
    const other = rows.filter((r) => r.medianGBps !== undefined && !['copy', 'sm-copy', 'peer', 'cache', 'collective'].includes(r.test));
    if (other.length) out.push('', rowsTable(other, false, width));
    const lat = rows.filter((r) => r.medianUs !== undefined);
    if (lat.length)
      out.push('', ...prose('latency (µs per operation: allocate+free pairs; one dependent load for pointer chase):'), rowsTable(lat, true, width));
    const notes = rows.filter((r) => r.note);
    if (notes.length) {
      out.push('', 'notes:');
      for (const r of notes) out.push(...prose(`  ${r.test} ${r.direction} ${r.srcKind}->${r.dstKind} (${sizeLabel(r.bytes)}): ${r.note}`, '    '));
    }
  }
  if (e.failures.length) {
    out.push('', 'FAILURES (reported instead of a figure):');
    for (const f of e.failures) out.push(...prose(`  ${f.test} ${f.direction} ${sizeLabel(f.bytes)}: ${f.reason}`, '    '));
  }
  return out.join('\n');
}

/** Collective rows as nccl-tests prints them: size, then algorithm and bus bandwidth per operation and buffers. */
function collectivesTable(rows: BenchResult[], width: number | undefined): string {
  const ranks = rows[0]?.ranks ?? 0;
  const body = rows.map((r) => [
    r.direction,
    `${r.engine} ${r.srcKind}`,
    sizeLabel(r.bytes),
    gb(r),
    r.medianBusGBps === undefined ? '-' : r.medianBusGBps >= 100 ? r.medianBusGBps.toFixed(0) : r.medianBusGBps.toFixed(1),
    spread(r),
    `${(r.cv * 100).toFixed(1)}%`,
  ]);
  return `collectives over ${ranks} ranks (size, algorithm bandwidth = size / time and bus bandwidth as nccl-tests count them):\n${table(
    ['collective', 'library, buffers', '>size', '>algbw GB/s', '>busbw GB/s', '>min-max algbw', '>cv'],
    body,
    { width, priorities: [undefined, undefined, undefined, 3, undefined, 2, 1], wrap: [true, true] },
  )}`;
}

/** The engine column: with a stager's threads and chunk size, or a batch's copy count, where a row has them. */
export function engineLabel(r: BenchResult): string {
  const parts = [r.engine];
  if (r.threads !== undefined && r.threads > 0) parts.push(`${r.threads}t`);
  if (r.chunkBytes !== undefined && r.threads) parts.push(`${formatBytes(r.chunkBytes, 0)} chunks`);
  if (r.copies !== undefined) parts.push(`${r.copies} copies`);
  return parts.join(' ');
}
