/** The bench's HTML page: bandwidth against size for each kind, the peer matrix, the cache sweep, every row. */
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { engineLabel } from './bench-text.js';
import { chartPlaceholder, esc, htmlTable, renderPage, type ChartSpec } from './html.js';

/** Ten colours far apart; a chart draws at most as many series as there are colours (the copies are split to do so). */
const COLORS = ['#0969da', '#cf222e', '#1a7f37', '#9a6700', '#8250df', '#bc4c00', '#57606a', '#e85aad', '#00a3a3', '#1b1f24'];
/** Dash patterns by engine, so that a series reads apart from its neighbour in print or to a colour-blind eye too. */
const DASHES: Record<string, number[]> = { 'copy-engine': [], sm: [6, 3] };
const POINTS = ['circle', 'rect', 'triangle', 'rectRot', 'crossRot', 'star', 'rectRounded', 'cross', 'line', 'dash'];

/**
 * Line chart of GB/s against size, one line per series key, each with its own colour and point style (and a dash
 * by engine). Sizes go on a log2 axis ticked at powers of two in bytes (the page's script draws the ticks).
 */
export function sizeChart(id: string, title: string, rows: BenchResult[], key: (r: BenchResult) => string, xTitle = 'bytes'): ChartSpec {
  const keys = [...new Set(rows.map(key))];
  return {
    id,
    title,
    config: {
      type: 'line',
      data: {
        datasets: keys.map((k, i) => {
          const mine = rows.filter((r) => key(r) === k && r.medianGBps !== undefined).sort((a, b) => a.bytes - b.bytes);
          return {
            label: k,
            data: mine.map((r) => ({ x: r.bytes, y: r.medianGBps })),
            borderColor: COLORS[i % COLORS.length],
            backgroundColor: COLORS[i % COLORS.length],
            borderDash: DASHES[mine[0]?.engine ?? ''] ?? [2, 2],
            pointStyle: POINTS[i % POINTS.length],
            pointRadius: 4,
          };
        }),
      },
      options: {
        plugins: { title: { display: true, text: title } },
        scales: {
          y: { type: 'logarithmic', title: { display: true, text: 'GB/s (1e9 bytes/s), median' } },
          x: { type: 'logarithmic', bytes: true, title: { display: true, text: `${xTitle} (log2 scale)` } },
        },
      },
    },
  };
}

/** The copy charts, split by direction so that no chart has more series than colours. */
const COPY_GROUPS: ReadonlyArray<readonly [string, string, (r: BenchResult) => boolean]> = [
  ['htod', 'host to device', (r) => r.direction === 'HtoD'],
  ['dtoh', 'device to host', (r) => r.direction === 'DtoH'],
  ['other', 'device to device, and both directions at once', (r) => r.direction !== 'HtoD' && r.direction !== 'DtoH'],
];

export function benchSections(report: BenchReport): { sections: Array<{ heading: string; html: string }>; charts: ChartSpec[] } {
  const sections: Array<{ heading: string; html: string }> = [];
  const charts: ChartSpec[] = [];
  for (const d of report.environment.devices) {
    const rows = report.results.filter((r) => r.device === d.index);
    const copy = rows.filter((r) => r.test === 'copy' || r.test === 'sm-copy');
    const copyIds: string[] = [];
    for (const [g, what, keep] of COPY_GROUPS) {
      const mine = copy.filter(keep);
      if (mine.length === 0) continue;
      const id = `copy-${d.index}-${g}`;
      copyIds.push(id);
      charts.push(
        sizeChart(id, `Device ${d.index}: copies ${what}, bandwidth against size`, mine, (r) => `${r.direction} ${r.srcKind}→${r.dstKind} (${r.engine})`),
      );
    }
    const cache = rows.filter((r) => r.test === 'cache');
    const idk = `cache-${d.index}`;
    if (cache.length) charts.push(sizeChart(idk, `Device ${d.index}: read bandwidth against working set (cache levels)`, cache, () => 'read', 'working set'));
    const peers = rows.filter((r) => r.test === 'peer' && r.direction === 'one-way');
    let peerHtml = '<p class="note">No peer figures: one device was measured.</p>';
    if (peers.length) {
      const devs = report.environment.devices.map((x) => x.index);
      const cell = (i: number, j: number, direction: string, engine: string, access: boolean): string => {
        if (i === j) return '—';
        const r = report.results.find(
          (x) => x.test === 'peer' && x.direction === direction && x.engine === engine && x.device === i && x.peer === j && x.peerAccess === access,
        );
        return r?.medianGBps !== undefined ? r.medianGBps.toFixed(1) : r?.medianUs !== undefined ? r.medianUs.toFixed(2) : '';
      };
      const matrices: Array<[string, string, string, boolean]> = [
        ['copy engine, peer access on (GB/s, one way, row → column)', 'one-way', 'copy-engine', true],
        ['copy engine, peer access off (GB/s, one way)', 'one-way', 'copy-engine', false],
        ['a kernel on the column device reading the row device (GB/s, peer access on)', 'one-way', 'sm', true],
        ['latency of a 4-byte copy (µs, peer access on)', 'latency', 'copy-engine', true],
      ];
      peerHtml = matrices
        .filter(([, direction, engine, access]) =>
          report.results.some((x) => x.test === 'peer' && x.direction === direction && x.engine === engine && x.peerAccess === access),
        )
        .map(
          ([title, direction, engine, access]) =>
            `<h3>${title}</h3>${htmlTable(
              ['from \\ to', ...devs.map(String)],
              devs.map((i) => [String(i), ...devs.map((j) => cell(i, j, direction, engine, access))]),
            )}`,
        )
        .join('');
    }
    const fmt = (r: BenchResult): Array<string | number> => [
      `${r.test} ${r.direction}`,
      `${r.srcKind}→${r.dstKind}`,
      engineLabel(r),
      formatBytes(r.bytes, 0),
      r.medianGBps !== undefined ? r.medianGBps.toFixed(2) : `${r.medianUs!.toFixed(3)} µs`,
      r.medianGBps !== undefined ? `${r.minGBps!.toFixed(2)}–${r.maxGBps!.toFixed(2)}` : `${r.minUs!.toFixed(3)}–${r.maxUs!.toFixed(3)}`,
      `${(r.cv * 100).toFixed(1)}%`,
      r.counted,
      r.percentOfPeak !== undefined ? `${r.percentOfPeak}%` : '',
      r.verified ? 'yes' : 'NO',
      r.note ?? '',
    ];
    sections.push({
      heading: `Device ${d.index}: ${d.name ?? 'unknown'} (${d.arch ?? '?'})`,
      html: `<p>Link ${d.link ? `gen ${d.link.generation} x${d.link.width}` : 'unknown'}; peaks: ${d.peaks.linkGBps ?? '?'} GB/s link, ${d.peaks.memoryGBps ?? '?'} GB/s memory (${esc(d.peaks.how)}).</p>
${copyIds.map(chartPlaceholder).join('')}${cache.length ? chartPlaceholder(idk) : ''}
<h3>Peer matrix</h3>${peerHtml}
<h3>Every row</h3>${htmlTable(['measure', 'memory', 'engine', 'bytes', 'median', 'min–max', 'cv', 'counted', 'of peak', 'verified', 'note'], rows.map(fmt))}`,
    });
  }
  if (report.environment.failures.length) {
    sections.push({
      heading: 'Failures',
      html: htmlTable(
        ['test', 'direction', 'bytes', 'reason'],
        report.environment.failures.map((f) => [f.test, f.direction, formatBytes(f.bytes, 0), f.reason]),
      ),
    });
  }
  return { sections, charts };
}

/** The banner of a page of a run that was stopped. */
export const INTERRUPTED_PAGE = 'the run was stopped before it finished; the page holds only the measurements finished before it.';

export function benchHtml(report: BenchReport): string {
  const e = report.environment;
  const { sections, charts } = benchSections(report);
  return renderPage({
    title: `gpumem bench — ${e.devices.map((d) => d.name).join(', ')}`,
    subtitle: `backend ${e.backend}${e.backend === 'host' ? ' (CPU memory, not GPU figures)' : ''}, ${e.mode} mode, ${e.date}, ${e.seconds} s. GB = 1e9 bytes.`,
    partial: e.interrupted ? INTERRUPTED_PAGE : undefined,
    sections,
    charts,
  });
}
