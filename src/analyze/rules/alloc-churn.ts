/** alloc-churn and pinned-alloc-churn: memory allocated and freed again in the steady state. */
import { formatNs } from '../../units.js';
import { AllocLevel, classifyApi } from '../model.js';
import { aggregateFinding, severityOf, steadyFrom, sum, type RuleCheck } from './shared.js';

export function allocationChurn(apis: number[], host: boolean): RuleCheck {
  return (ctx) => {
    const r = ctx.model.runtime;
    const from = steadyFrom(ctx);
    const idx: number[] = [];
    let callAllocs = 0;
    for (let i = 0; i < r.length; i++) {
      if (!apis.includes(r.get(i, 'api')) || r.get(i, 'start') < from) continue;
      idx.push(i);
      if (r.get(i, 'api') === apis[0]) callAllocs++;
    }
    const a = ctx.model.allocs;
    let allocs = 0;
    let frees = 0;
    for (let i = 0; i < a.length; i++) {
      if (a.get(i, 'level') !== AllocLevel.driver || a.get(i, 'host') !== (host ? 1 : 0) || a.get(i, 'time') < from) continue;
      if (a.get(i, 'bytes') > 0) allocs++;
      else frees++;
    }
    const need = host ? 4 : 10;
    // churn is memory given back and taken again: growth alone (allocations without frees) is not churn
    const churnCalls = Math.min(callAllocs, idx.length - callAllocs) * 2 >= need;
    const events = Math.min(allocs, frees) * 2 >= need ? allocs + frees : 0;
    if (!churnCalls) idx.length = 0;
    const aggregate = ctx.model.aggregateApis.filter((x) => apis.includes(classifyApi(x.name)));
    if (idx.length < need && events < need) {
      if (aggregate.reduce((s, x) => s + x.calls, 0) < need * 2 || r.length > 0) return undefined;
      return aggregateFinding(
        'low',
        host ? 'Pinned memory allocated many times (aggregate statistics)' : 'Many device allocations (aggregate statistics)',
        aggregate,
        'steady-state allocations from warm-up',
        host ? 'Allocate pinned buffers once and reuse them.' : 'Keep memory in a caching pool rather than allocating and freeing it every step.',
      );
    }
    const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start'));
    const poolHitNs = 300;
    const saving = Math.max(0, t - idx.length * (host ? 0 : poolHitNs));
    return {
      severity: severityOf(saving, ctx.spanNs),
      title: host ? 'Pinned host memory is allocated and freed in the steady state' : 'Device memory is allocated and freed in the steady state',
      count: Math.max(idx.length, events),
      bytes: null,
      timeNs: t,
      estimatedSavingNs: saving,
      savingHow:
        idx.length > 0
          ? host
            ? 'host time inside the pinned allocation and free calls after warm-up (reused buffers cost nothing per step)'
            : `host time inside the allocation and free calls after warm-up, minus ${poolHitNs} ns per call for a pool hit (gpumem's pool measured 0.13-0.28 µs per allocate + free on the H200 machine)`
          : "not computed: the trace records allocations but not the calls' durations",
      evidence: [
        `${Math.max(idx.length, events)} ${host ? 'pinned host' : 'device'} allocations and frees after the first fifth of the trace (warm-up excluded)${idx.length > 0 ? `, ${formatNs(t)} in the calls` : ''}`,
      ],
      change: host
        ? "Allocate pinned buffers once and reuse them (a staging ring, gpumem's PinnedResource behind a CachingPool): pinning pages costs milliseconds (gpumem bench measured 27-33 ms to allocate and free 64 MiB of pinned memory on the H200 machine)."
        : "Keep memory in a caching pool: PyTorch's caching allocator (no torch.cuda.empty_cache() in the loop), cudaMallocAsync / hipMallocAsync with a memory pool release threshold, or gpumem's CachingPool.",
    };
  };
}
