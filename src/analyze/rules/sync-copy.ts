/** sync-copy: copies that block the host. */
import { formatNs } from '../../units.js';
import { Api } from '../model.js';
import { RECURRING, severityOf, sum, type RuleCheck } from './shared.js';

export const syncCopy: RuleCheck = (ctx) => {
  const r = ctx.model.runtime;
  const idx: number[] = [];
  for (let i = 0; i < r.length; i++) if (r.get(i, 'api') === Api.memcpySync) idx.push(i);
  if (idx.length < RECURRING) return undefined;
  const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start'));
  return {
    severity: severityOf(t, ctx.spanNs),
    title: 'Synchronous copy calls block the host',
    count: idx.length,
    bytes: null,
    timeNs: t,
    estimatedSavingNs: t,
    savingHow:
      'host time spent inside synchronous memcpy calls, which an asynchronous copy returns immediately from (an upper bound: the host may have nothing else to do)',
    evidence: [`${idx.length} synchronous memcpy calls (${ctx.api('cudaMemcpy', 'hipMemcpy')} and kin) held the host ${formatNs(t)}`],
    change: `Use ${ctx.api('cudaMemcpyAsync', 'hipMemcpyAsync')} on a stream, from pinned memory, and wait on an event only when the data is needed.`,
  };
};
