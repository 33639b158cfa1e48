/** `gpumem analyze` of one trace per rank: the text rendering of the ranks compared. */
import type { RanksResult } from '../analyze/ranks.js';
import { formatBytes, formatNs } from '../units.js';
import { fitLines } from './width.js';
import { table } from './text.js';

/** Ranks listed one per row up to this many; past it, the stragglers and the spread of each column. */
const ALL_ROWS = 32;

/** What a rule saves across ranks, in words: a rule that fired with no saving (its figures not priced) saves no time. */
export function savesAcrossRanks(medianNs: number, maxNs: number): string {
  if (maxNs <= 0) return 'no time saved that the traces can price (see each rank)';
  if (medianNs <= 0) return `saves up to ${formatNs(maxNs)} on a rank, nothing on the median rank`;
  return `saves about ${formatNs(medianNs)} per rank (median), ${formatNs(maxNs)} at most`;
}

/** The ranks compared, as text no wider than `width` where given. */
export function renderRanks(r: RanksResult, options: { width?: number } = {}): string {
  const width = options.width;
  const out: string[] = [];
  out.push(
    `ranks: ${r.ranks.length} traces (${r.format}), analysed on ${r.workers} worker thread${r.workers === 1 ? '' : 's'} in ${formatNs(r.wallNs)}${r.refused.length ? `; ${r.refused.length} refused` : ''}`,
  );
  for (const x of r.refused) out.push(`refused: ${x.file}: ${x.reason}`);
  for (const n of r.notes) out.push(`note: ${n}`);
  out.push('');
  const header = ['rank', '>span', '>GPU busy', '>copies', '>copy time', '>syncs', '>blocked', 'largest finding'];
  const row = (x: RanksResult['ranks'][number]) => {
    const top = x.findings[0];
    return [
      x.rank,
      formatNs(x.metrics.spanNs),
      formatNs(x.metrics.kernelBusyNs),
      x.metrics.copyBytes > 0 ? formatBytes(x.metrics.copyBytes) : '-',
      formatNs(x.metrics.copyNs),
      x.metrics.syncs,
      formatNs(x.metrics.syncBlockedNs),
      top ? (top.estimatedSavingNs > 0 ? `${top.rule} (${formatNs(top.estimatedSavingNs)})` : top.rule) : 'none',
    ];
  };
  const priorities = [undefined, 3, 4, 2, 5, 1, 6, 7];
  if (r.ranks.length <= ALL_ROWS) out.push(table(header, r.ranks.map(row), { width, priorities }));
  else {
    const spread = (k: keyof RanksResult['ranks'][number]['metrics']) => {
      const v = r.ranks.map((x) => x.metrics[k]).sort((a, b) => a - b);
      return `${formatNs(v[0]!)} / ${formatNs(v[v.length >> 1]!)} / ${formatNs(v[v.length - 1]!)}`;
    };
    out.push(`per rank, min / median / max over ${r.ranks.length} ranks:`);
    out.push(
      table(
        ['figure', 'min / median / max'],
        [
          ['span', spread('spanNs')],
          ['GPU busy', spread('kernelBusyNs')],
          ['copy time', spread('copyNs')],
          ['host blocked in synchronisation', spread('syncBlockedNs')],
        ],
      ),
    );
    const shown = new Set(r.stragglers.map((s) => s.rank));
    if (shown.size) out.push('', table(header, r.ranks.filter((x) => shown.has(x.rank)).map(row), { width, priorities }));
  }
  out.push('');
  if (r.stragglers.length === 0) out.push(`stragglers: none${r.ranks.length < 3 ? ' (too few ranks to tell)' : ' — no rank stands out from the others'}`);
  else {
    out.push(`stragglers (${r.stragglers.length}): ranks that stand out from the others hold the job back at every collective`);
    for (const s of r.stragglers)
      out.push(`  - ${s.evidence}${s.excessNs > 0 ? `; up to ${formatNs(s.excessNs)} saved if it did as the median rank does` : ''}`);
  }
  out.push(`  (${r.method})`);
  out.push('');
  if (r.rules.length === 0) out.push('findings: none on any rank');
  else {
    out.push('findings across ranks:');
    for (const f of r.rules)
      out.push(`  - ${f.rule}: ${f.title} — on ${f.ranks.length} of ${r.ranks.length} ranks; ${savesAcrossRanks(f.medianSavingNs, f.maxSavingNs)}`);
    out.push("  (each rank's evidence and change: --json, or gpumem analyze on that rank's file)");
  }
  return fitLines(out.join('\n'), width);
}
