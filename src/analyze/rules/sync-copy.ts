/** sync-copy: copies that block the host. */
import { formatNs } from '../../units.js';
import { Api, classifyApi } from '../model.js';
import { coveredWithin } from '../intervals.js';
import { basisOf, cappedAtMedian, RECURRING, severityOf, sum, type RuleCheck } from './shared.js';

export const syncCopy: RuleCheck = (ctx) => {
  const r = ctx.model.runtime;
  const idx: number[] = [];
  for (let i = 0; i < r.length; i++) if (r.get(i, 'api') === Api.memcpySync) idx.push(i);
  // a tool's totals per call name give the same figures: how many calls, and the host time inside them
  const totals = r.length === 0 ? ctx.model.aggregateApis.filter((a) => classifyApi(a.name) === Api.memcpySync) : [];
  const count = idx.length + totals.reduce((s, a) => s + a.calls, 0);
  if (count < RECURRING) return undefined;
  const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start')) + totals.reduce((s, a) => s + a.totalNs, 0);
  // A call's host time less the kernels it waited for (an asynchronous copy waits for them on its stream too),
  // each counted at most at the median call: a call far longer than its peers was held by something else.
  const waits = idx.map((i) => {
    const a = r.get(i, 'start');
    const b = r.get(i, 'end');
    return Math.max(0, b - a - coveredWithin(ctx.allKernels, a, b));
  });
  const capped = cappedAtMedian(waits);
  const saving = totals.length ? totals.reduce((s, a) => s + a.totalNs, 0) : capped.sumNs;
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Synchronous copy calls block the host',
    count,
    bytes: null,
    timeNs: t,
    estimatedSavingNs: saving,
    // totals have no times: a saving from them rests on no interval and is bounded by their own total
    basis: totals.length ? undefined : basisOf(r, idx),
    savingHow: totals.length
      ? 'host time spent inside synchronous memcpy calls, which an asynchronous copy returns immediately from (an upper bound: the host may have nothing else to do)'
      : 'host time spent inside synchronous memcpy calls less the kernels they waited for, each call counted at most at the median call, which an asynchronous copy returns immediately from (an upper bound: the host may have nothing else to do)',
    evidence: [
      `${count} synchronous memcpy calls (${ctx.api('cudaMemcpy', 'hipMemcpy')} and kin) held the host ${formatNs(t)}${totals.length ? ` (from aggregate statistics: ${totals.map((a) => `${a.name} ${a.calls} calls`).join(', ')})` : ''}`,
      ...(capped.over > 0
        ? [
            `${capped.over} calls took more than twice the median call (${formatNs(capped.capNs)}): the ${formatNs(capped.excessNs)} beyond it was spent waiting on something other than their copies, which an asynchronous copy does not avoid, and is left out`,
          ]
        : []),
    ],
    change: `Use ${ctx.api('cudaMemcpyAsync', 'hipMemcpyAsync')} on a stream, from pinned memory, and wait on an event only when the data is needed.`,
  };
};
