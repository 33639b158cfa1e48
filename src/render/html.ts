/**
 * One self-contained HTML page: inline CSS, Chart.js inlined from its package, and the data as JSON. No network
 * access is needed to view it. Used by bench, report, plan and analyze.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

let chartJs: string | undefined;
/** Chart.js (UMD build) as text, for pages that inline it. */
export function chartLibrary(): string {
  if (chartJs === undefined) {
    // chart.js exports no package.json subpath: resolve its main file (dist/chart.cjs) and read the UMD build beside it.
    const dir = dirname(require.resolve('chart.js'));
    chartJs = readFileSync(join(dir, 'chart.umd.min.js'), 'utf8');
  }
  return chartJs;
}

/** Escapes text for HTML. */
export function esc(s: unknown): string {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** JSON that is safe inside a <script> element. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** A Chart.js chart: its canvas id and configuration (type, data, options). */
export interface ChartSpec {
  id: string;
  title: string;
  config: Record<string, unknown>;
  /** Height in pixels (default 320). */
  height?: number;
}

export interface PageSpec {
  title: string;
  subtitle?: string;
  /** Set when the run was stopped before it finished: a banner at the top says what the page holds. */
  partial?: string | undefined;
  /** HTML sections in order; a chart is placed where a section's html contains `<!--chart:ID-->`. */
  sections: Array<{ heading: string; html: string }>;
  charts: ChartSpec[];
}

/** Renders a table: headers and rows of cells (already-escaped HTML when `raw`). */
export function htmlTable(headers: string[], rows: Array<Array<string | number | undefined>>, options: { raw?: boolean; className?: string } = {}): string {
  const cell = (c: string | number | undefined): string => (c === undefined ? '' : options.raw ? String(c) : esc(c));
  return `<table class="${options.className ?? 'data'}"><thead><tr>${headers.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${cell(c)}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
}

export function chartPlaceholder(id: string): string {
  return `<!--chart:${id}-->`;
}

const CSS = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #1b1f24; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; padding-bottom: .3rem; }
.subtitle { color: #57606a; } table.data { border-collapse: collapse; margin: .6rem 0; font-variant-numeric: tabular-nums; }
table.data th, table.data td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: right; } table.data th { background: #f6f8fa; }
table.data td:first-child, table.data th:first-child { text-align: left; } .chart { position: relative; margin: 1rem 0; }
.note { color: #57606a; font-size: .92rem; } .warn { color: #9a6700; } .bad { color: #cf222e; } .good { color: #1a7f37; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: .6rem 1rem; margin: .6rem 0; }
`;

export function renderPage(page: PageSpec): string {
  const charts = new Map(page.charts.map((c) => [c.id, c]));
  const body = page.sections
    .map((s) => {
      const html = s.html.replace(/<!--chart:([\w-]+)-->/g, (_, id: string) => {
        const c = charts.get(id);
        return c
          ? `<figure class="chart" style="height:${c.height ?? 320}px"><canvas id="${esc(id)}" aria-label="${esc(c.title)}" role="img"></canvas></figure>`
          : '';
      });
      return `<section><h2>${esc(s.heading)}</h2>${html}</section>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(page.title)}</title><style>${CSS}</style></head>
<body>${page.partial ? `<p class="card bad" id="partial" data-interrupted="true"><strong>INTERRUPTED:</strong> ${esc(page.partial)}</p>` : ''}<h1>${esc(page.title)}</h1>${page.subtitle ? `<p class="subtitle">${esc(page.subtitle)}</p>` : ''}
${body}
<script>${chartLibrary()}</script>
<script>
const GPUMEM_CHARTS = ${scriptJson(page.charts.map((c) => ({ id: c.id, config: c.config })))};
window.gpumemCharts = [];
// an axis marked bytes: a log scale ticked at powers of two, labelled in binary units (4 KiB, 1 MiB, ...)
const gpumemBytes = (v) => { const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0; while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; } return (Number.isInteger(v) ? v : v.toFixed(1)) + ' ' + u[i]; };
const gpumemLog2Ticks = (axis) => {
  const lo = Math.ceil(Math.log2(Math.max(1, axis.min))), hi = Math.floor(Math.log2(Math.max(1, axis.max)));
  const step = Math.max(1, Math.ceil((hi - lo + 1) / 12));
  axis.ticks = [];
  for (let p = lo; p <= hi; p += step) axis.ticks.push({ value: 2 ** p });
};
for (const c of GPUMEM_CHARTS) {
  const el = document.getElementById(c.id);
  if (!el) continue;
  c.config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, c.config.options || {});
  for (const s of Object.values(c.config.options.scales || {}))
    if (s.bytes) {
      delete s.bytes;
      s.afterBuildTicks = gpumemLog2Ticks;
      s.ticks = Object.assign({}, s.ticks, { autoSkip: false, callback: (v) => gpumemBytes(v) });
    }
  window.gpumemCharts.push(new Chart(el, c.config));
}
</script></body></html>
`;
}
