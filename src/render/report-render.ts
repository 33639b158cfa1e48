/** Text and HTML renderings of `gpumem report`. */
import { renderBench } from './bench-text.js';
import { renderInfo } from './info-text.js';
import { benchSections, INTERRUPTED_PAGE } from './bench-html.js';
import { esc, htmlTable, renderPage } from './html.js';
import { wrapLine, wrapText } from './width.js';
import type { Report } from '../report/report.js';
import type { Evidence } from '../report/advice.js';

const where = (r: Report): string => `one ${r.nativeComparison.machine}, ${r.nativeComparison.measured}, ${r.nativeComparison.evidence}`;
const mark = (e: Evidence): string =>
  e.nativeState === 'agrees' ? ' [agrees with native C]' : e.nativeState === 'not compared' ? ' [not compared with native C]' : '';

/** The report as text, no wider than `width` where given (tables give up columns, prose wraps). */
export function renderReportText(r: Report, options: { width?: number } = {}): string {
  const width = options.width;
  const out: string[] = [];
  const prose = (line: string, indent?: string): string[] => (width === undefined ? [line] : wrapLine(line, width, indent));
  if (r.hostNotice) out.push(...prose(`NOTE: ${r.hostNotice}`), '');
  const info = renderInfo(r.info);
  out.push(
    '== this machine ==',
    width === undefined ? info : wrapText(info, width),
    '',
    '== measured (bench --quick) ==',
    renderBench(r.bench, { width }),
    '',
    '== strategy ==',
  );
  if (r.hostNotice) out.push('No strategy on the host backend: it needs figures measured on a GPU.');
  for (const d of r.advice) {
    out.push(`device ${d.device}:`);
    for (const w of ['training', 'inference', 'preprocessing'] as const) {
      const items = d.items.filter((a) => a.workloads.includes(w));
      out.push(`  ${w}:`);
      if (items.length === 0) out.push('    (nothing measured that bears on it)');
      for (const a of items) out.push(...prose(`    - ${a.title}`));
    }
    out.push('', '  why, with the figures:');
    const run = d.items.flatMap((a) => a.evidence).find((e) => e.run)?.run;
    if (run) out.push(...prose(`  (figures from ${run}; each marked with how its kind of row compared with native CUDA C: ${where(r)})`, '   '));
    for (const a of d.items) {
      out.push(...prose(`  * ${a.title}`));
      out.push(...prose(`    ${a.recommendation}`));
      if (a.evidence.length) out.push(...prose(`    measured: ${a.evidence.map((e) => `${e.label} ${e.value} ${e.unit}${mark(e)}`).join('; ')}`, '      '));
    }
    if (d.withheld.length) {
      out.push('', ...prose('  left out (not quoted: the kind of row differed from native CUDA C beyond its spread):'));
      for (const w of d.withheld) out.push(...prose(`  - ${w.source}: ${w.reason}`));
    }
  }
  return out.join('\n');
}

export function renderReportHtml(r: Report): string {
  const { sections, charts } = benchSections(r.bench);
  const devices = r.info.devices.map((d) => [
    String(d.index),
    d.name ?? 'unknown',
    d.arch ?? '',
    d.totalBytes !== undefined ? `${(d.totalBytes / 2 ** 30).toFixed(1)} GiB` : 'unknown',
    d.multiprocessors ?? '',
    d.link ? `gen ${d.link.generation} x${d.link.width}` : 'unknown',
    d.numaNode ?? 'unknown',
    d.concurrentManagedAccess === undefined ? 'unknown' : d.concurrentManagedAccess ? 'yes' : 'no',
    d.xnack?.enabled === undefined ? '' : d.xnack.enabled ? 'on' : 'off',
  ]);
  const advice = r.advice
    .map(
      (d) =>
        `<h3>Device ${d.device}</h3>` +
        d.items
          .map(
            (a) =>
              `<div class="card advice" data-id="${esc(a.id)}"><strong>${esc(a.title)}</strong><br><span class="note">${esc(a.workloads.join(', '))}</span><p>${esc(a.recommendation)}</p>${
                a.evidence.length
                  ? `<p class="note">measured: ${a.evidence.map((e) => `${esc(e.label)} <b>${esc(e.value)} ${esc(e.unit)}</b><span title="${esc(e.native ?? '')}">${esc(mark(e))}</span>`).join('; ')}</p>`
                  : ''
              }</div>`,
          )
          .join('') +
        (d.withheld.length
          ? `<p class="note">Left out (the kind of row differed from native CUDA C beyond its spread, ${esc(where(r))}): ${d.withheld.map((w) => esc(w.source)).join('; ')}</p>`
          : ''),
    )
    .join('');
  return renderPage({
    title: `gpumem report — ${r.info.devices.map((d) => d.name).join(', ') || r.backend}`,
    subtitle: `backend ${r.backend}${r.info.runtimeVersion ? `, runtime ${r.info.runtimeVersion}` : ''}; ${r.bench.environment.date}. GB = 1e9 bytes, GiB = 2^30 bytes.`,
    partial: r.bench.environment.interrupted ? INTERRUPTED_PAGE : undefined,
    sections: [
      ...(r.hostNotice ? [{ heading: 'Host backend', html: `<p class="warn">${esc(r.hostNotice)}</p>` }] : []),
      {
        heading: 'This machine',
        html: htmlTable(['device', 'name', 'arch', 'memory', 'SMs / CUs', 'PCIe link', 'NUMA node', 'concurrent managed access', 'XNACK (AMD)'], devices),
      },
      {
        heading: 'Strategy',
        html:
          advice || (r.hostNotice ? '<p>No strategy on the host backend: it needs figures measured on a GPU.</p>' : '<p>No advice: nothing was measured.</p>'),
      },
      ...sections,
    ],
    charts,
  });
}
