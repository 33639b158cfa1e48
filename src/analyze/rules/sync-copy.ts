/** sync-copy: copies that block the host. */
import { formatNs } from '../../units.js';
import { Api, classifyApi } from '../model.js';
import { coveredWithin } from '../intervals.js';
import { basisOf, cappedAtMedian, RECURRING, severityOf, sum, totalsCannotTell, type RuleCheck } from './shared.js';

export const syncCopy: RuleCheck = (ctx) => {
  const r = ctx.model.runtime;
  const idx: number[] = [];
  for (let i = 0; i < r.length; i++) if (r.get(i, 'api') === Api.memcpySync) idx.push(i);
  if (r.length === 0) {
    // a tool's totals per call name hold the host time inside the calls, not how much of it was waiting on earlier work
    const totals = ctx.model.aggregateApis.filter((a) => classifyApi(a.name) === Api.memcpySync);
    if (totals.reduce((s, a) => s + a.calls, 0) < RECURRING) return undefined;
    return totalsCannotTell(totals, 'how much of each call waited for the kernels and copies before it, which an asynchronous copy waits for too');
  }
  const count = idx.length;
  if (count < RECURRING) return undefined;
  const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start'));
  // A call's host time less the kernels it waited for (an asynchronous copy waits for them on its stream too),
  // each counted at most at the median call: a call far longer than its peers was held by something else.
  const waits = idx.map((i) => {
    const a = r.get(i, 'start');
    const b = r.get(i, 'end');
    return Math.max(0, b - a - coveredWithin(ctx.allKernels, a, b));
  });
  const capped = cappedAtMedian(waits);
  const saving = capped.sumNs;
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Synchronous copy calls block the host',
    count,
    bytes: null,
    timeNs: t,
    estimatedSavingNs: saving,
    basis: basisOf(r, idx),
    savingHow:
      'host time spent inside synchronous memcpy calls less the kernels they waited for, each call counted at most at the median call, which an asynchronous copy returns immediately from (an upper bound: the host may have nothing else to do)',
    evidence: [
      `${count} synchronous memcpy calls (${ctx.api('cudaMemcpy', 'hipMemcpy')} and kin) held the host ${formatNs(t)}`,
      ...(capped.over > 0
        ? [
            `${capped.over} calls took more than twice the median call (${formatNs(capped.capNs)}): the ${formatNs(capped.excessNs)} beyond it was spent waiting on something other than their copies, which an asynchronous copy does not avoid, and is left out`,
          ]
        : []),
    ],
    change: `Use ${ctx.api('cudaMemcpyAsync', 'hipMemcpyAsync')} on a stream, from pinned memory, and wait on an event only when the data is needed.`,
  };
};
