/** alloc-churn and pinned-alloc-churn: memory allocated and freed again in the steady state. */
import { formatNs } from '../../units.js';
import { AllocLevel, classifyApi } from '../model.js';
import { basisOf, cappedAtMedian, severityOf, steadyFrom, sum, totalsCannotTell, type RuleCheck } from './shared.js';

/**
 * Churn is memory given back and taken again: an allocation counts when a free came before it, a free when an
 * allocation comes after it. Allocations before the first free (start-up, growth) and frees after the last
 * allocation (teardown) are one-off.
 */
function interleaved<T>(items: T[], time: (x: T) => number, isAlloc: (x: T) => boolean): T[] {
  let firstFree = Infinity;
  let lastAlloc = -Infinity;
  for (const x of items) {
    if (isAlloc(x)) lastAlloc = Math.max(lastAlloc, time(x));
    else firstFree = Math.min(firstFree, time(x));
  }
  return items.filter((x) => (isAlloc(x) ? time(x) > firstFree : time(x) < lastAlloc));
}

export function allocationChurn(apis: number[], host: boolean): RuleCheck {
  return (ctx) => {
    const r = ctx.model.runtime;
    const from = steadyFrom(ctx);
    const steady: number[] = [];
    for (let i = 0; i < r.length; i++) if (apis.includes(r.get(i, 'api')) && r.get(i, 'start') >= from) steady.push(i);
    const idx = interleaved(
      steady,
      (i) => r.get(i, 'start'),
      (i) => r.get(i, 'api') === apis[0],
    );
    const oneOff = steady.length - idx.length;
    const callAllocs = idx.filter((i) => r.get(i, 'api') === apis[0]).length;
    const a = ctx.model.allocs;
    const rows: number[] = [];
    for (let i = 0; i < a.length; i++)
      if (a.get(i, 'level') === AllocLevel.driver && a.get(i, 'host') === (host ? 1 : 0) && a.get(i, 'time') >= from) rows.push(i);
    const churnRows = interleaved(
      rows,
      (i) => a.get(i, 'time'),
      (i) => a.get(i, 'bytes') > 0,
    );
    const allocs = churnRows.filter((i) => a.get(i, 'bytes') > 0).length;
    const frees = churnRows.length - allocs;
    const need = host ? 4 : 10;
    const churnCalls = Math.min(callAllocs, idx.length - callAllocs) * 2 >= need;
    const events = Math.min(allocs, frees) * 2 >= need ? allocs + frees : 0;
    if (!churnCalls) idx.length = 0;
    const aggregate = ctx.model.aggregateApis.filter((x) => apis.includes(classifyApi(x.name)));
    if (idx.length < need && events < need) {
      if (aggregate.reduce((s, x) => s + x.calls, 0) < need * 2 || r.length > 0) return undefined;
      return totalsCannotTell(aggregate, 'allocations in the steady state from those of start-up and teardown');
    }
    // each call counted at most at its API's median: a free that waited seconds for the device to drain is not churn
    const dur = (i: number): number => r.get(i, 'end') - r.get(i, 'start');
    const allocCalls = cappedAtMedian(idx.filter((i) => r.get(i, 'api') === apis[0]).map(dur));
    const freeCalls = cappedAtMedian(idx.filter((i) => r.get(i, 'api') !== apis[0]).map(dur));
    const t = allocCalls.sumNs + freeCalls.sumNs;
    const measured = sum(idx, dur);
    const poolHitNs = 300;
    const saving = Math.max(0, t - idx.length * (host ? 0 : poolHitNs));
    return {
      severity: severityOf(saving, ctx.spanNs),
      title: host ? 'Pinned host memory is allocated and freed in the steady state' : 'Device memory is allocated and freed in the steady state',
      count: Math.max(idx.length, events),
      bytes: null,
      timeNs: t,
      estimatedSavingNs: saving,
      basis: basisOf(r, idx),
      savingHow:
        idx.length > 0
          ? host
            ? 'host time inside the pinned allocation and free calls after warm-up, each counted at most at its median call (reused buffers cost nothing per step)'
            : `host time inside the allocation and free calls after warm-up, each counted at most at its median call, minus ${poolHitNs} ns per call for a pool hit (gpumem's pool measured 0.13-0.28 µs per allocate + free on the H200 machine)`
          : "not computed: the trace records allocations but not the calls' durations",
      evidence: [
        `${Math.max(idx.length, events)} ${host ? 'pinned host' : 'device'} allocations and frees after the first fifth of the trace (warm-up excluded), each allocation after a free or free before an allocation${idx.length > 0 ? `, ${formatNs(measured)} in the calls` : ''}`,
        ...(oneOff > 0
          ? [
              `${oneOff} one-off calls (allocations before the first free, frees after the last allocation: start-up and teardown) are not churn and are not counted`,
            ]
          : []),
        ...(allocCalls.over + freeCalls.over > 0
          ? [
              `${allocCalls.over + freeCalls.over} calls took more than twice their median (${formatNs(allocCalls.capNs)} per allocation, ${formatNs(freeCalls.capNs)} per free): the ${formatNs(allocCalls.excessNs + freeCalls.excessNs)} beyond it is waiting (a free synchronises the device) and is left out of the saving`,
            ]
          : []),
      ],
      change: host
        ? "Allocate pinned buffers once and reuse them (a staging ring, gpumem's PinnedResource behind a CachingPool): pinning pages costs milliseconds (gpumem bench measured 27-33 ms to allocate and free 64 MiB of pinned memory on the H200 machine)."
        : `Keep memory in a caching pool: PyTorch's caching allocator (no torch.cuda.empty_cache() in the loop), ${ctx.api('cudaMallocAsync', 'hipMallocAsync')} with a memory pool release threshold, or gpumem's CachingPool.`,
    };
  };
}
