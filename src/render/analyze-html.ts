/** `gpumem analyze --html`: the summary, findings and a timeline of copies against kernels per stream. */
import type { AnalyzeResult } from '../analyze/result.js';
import type { Timeline } from '../analyze/timeline.js';
import { formatBytes, formatNs } from '../units.js';
import { PER_DEVICE_HEADERS, perDeviceRows } from './analyze-text.js';
import { chartPlaceholder, esc, htmlTable, renderPage, type ChartSpec } from './html.js';

const COLOURS: Record<string, string> = {
  kernel: '#2da44e',
  memset: '#8250df',
  'copy HtoD pageable': '#cf222e',
  'copy DtoH pageable': '#fb8f44',
  'copy HtoD pinned': '#0969da',
  'copy DtoH pinned': '#54aeff',
};

export function renderAnalyzeHtml(r: AnalyzeResult, timeline: Timeline): string {
  const s = r.summary;
  const kinds = [...new Set(timeline.bars.map((b) => b.kind))].sort();
  const chart: ChartSpec = {
    id: 'timeline',
    title: 'copies, memsets and kernels per stream',
    height: Math.max(180, 60 + 36 * timeline.lanes.length),
    config: {
      type: 'bar',
      data: {
        labels: timeline.lanes,
        datasets: kinds.map((kind) => ({
          label: kind,
          data: timeline.bars.filter((b) => b.kind === kind).map((b) => ({ x: [b.start, b.end], y: b.lane })),
          backgroundColor: COLOURS[kind] ?? '#6e7781',
          grouped: false,
          barPercentage: 0.8,
          minBarLength: 1,
        })),
      },
      options: {
        indexAxis: 'y',
        scales: { x: { type: 'linear', title: { display: true, text: 'ms from the window start' } }, y: { type: 'category' } },
        plugins: { legend: { position: 'bottom' } },
      },
    },
  };
  const findings = r.findings.length
    ? r.findings
        .map(
          (
            f,
          ) => `<div class="card"><h3>${esc(`${f.rule}: ${f.title}`)} <span class="${f.severity === 'high' ? 'bad' : f.severity === 'medium' ? 'warn' : 'note'}">[${esc(f.severity)}]</span></h3>
<p>${esc(f.count)} events${f.bytes !== null ? `, ${esc(formatBytes(f.bytes))}` : ''}${f.timeNs > 0 ? `, ${esc(formatNs(f.timeNs))}` : ''}; saves about <b>${esc(f.estimatedSavingNs > 0 ? formatNs(f.estimatedSavingNs) : 'no time')}</b></p>
<ul>${f.evidence.map((e) => `<li>${esc(e)}</li>`).join('')}</ul><p class="note">saving: ${esc(f.savingHow)}</p><p><b>change:</b> ${esc(f.change)}</p></div>`,
        )
        .join('\n')
    : s.notApplicable.length > 0
      ? `<p>No finding among the rules that could judge this trace; ${s.notApplicable.length} could not (see the notes).</p>`
      : '<p class="good">No rule found a memory problem in this trace.</p>';
  const gpus =
    s.perDevice.length > 0
      ? htmlTable(
          PER_DEVICE_HEADERS.map((h) => h.replace(/^>/, '')),
          perDeviceRows(s),
        )
      : '';
  const copies = htmlTable(
    ['direction', 'host memory', 'copies', 'bytes', 'time', 'achieved'],
    s.copies.groups.map((g) => [
      g.direction,
      g.hostKind,
      g.count,
      g.bytes === null ? 'n/a' : formatBytes(g.bytes),
      formatNs(g.timeNs),
      g.achievedGBps === null ? 'n/a' : `${g.achievedGBps.toFixed(2)} GB/s`,
    ]),
  );
  const notes = [...s.notes.map((n) => `note: ${n}`), ...s.notApplicable.map((n) => `not judged: ${n.rule} — ${n.reason}`)];
  return renderPage({
    title: 'gpumem analyze',
    subtitle: `${s.files.join(', ')} (${s.formats.join(', ')}); span ${s.spanNs > 0 ? formatNs(s.spanNs) : 'not recorded'}`,
    sections: [
      { heading: `Findings (${r.findings.length})`, html: findings },
      {
        heading: 'Timeline',
        html: `<p class="note">${timeline.shown} of ${timeline.total} events, ${formatNs(timeline.windowNs[1] - timeline.windowNs[0])} from the start of the compute phase.</p>${chartPlaceholder('timeline')}`,
      },
      {
        heading: 'Summary',
        html: `${gpus}${copies}<p>overlap of copies with kernels: ${s.copies.overlapFraction === null ? 'n/a' : `${(100 * s.copies.overlapFraction).toFixed(1)}%`}; host synchronisations: ${s.syncs.streamSync + s.syncs.deviceSync + s.syncs.eventSync} (${esc(formatNs(s.syncs.hostBlockedNs))} blocked)</p>
<p class="note">copy rates: pinned HtoD ${s.rates.HtoD} GB/s, DtoH ${s.rates.DtoH} GB/s — ${esc(s.rates.source)}</p>${notes.map((n) => `<p class="note">${esc(n)}</p>`).join('')}`,
      },
    ],
    charts: [chart],
  });
}
