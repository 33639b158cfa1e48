/**
 * The rules. Each looks at the event model and returns a finding, or nothing, or a reason it cannot judge this
 * trace. Savings are computed from the trace's own figures and the stated copy rates, never guessed; where a saving
 * is an upper bound or overlaps another rule's, its `savingHow` says so.
 */
import { formatBytes, formatNs, KiB, MiB, GiB } from '../units.js';
import { AnalysisContext } from './context.js';
import { coveredWithin, unionLength, unionOf } from './intervals.js';
import { Api, AllocLevel, Direction, DIRECTIONS, MemKind, classifyApi, type AggregateApi } from './model.js';
import type { Finding, Severity } from './result.js';

export type RuleOutcome = Finding | { notApplicable: string } | undefined;

export interface Rule {
  id: string;
  run(ctx: AnalysisContext): RuleOutcome;
}

/** Small copies: under this many bytes. */
export const SMALL_COPY_BYTES = 64 * KiB;
/** Small copies: at least this many make a finding. */
export const SMALL_COPY_COUNT = 64;
/** A size seen at least this many times is recurring (per step), not a one-time upload. */
export const RECURRING = 3;
/** Blocking synchronisations: at least this many make a storm. */
export const SYNC_STORM_COUNT = 20;

function severityOf(savingNs: number, spanNs: number): Severity {
  const share = spanNs > 0 ? savingNs / spanNs : 0;
  return share >= 0.1 ? 'high' : share >= 0.02 ? 'medium' : 'low';
}

const pct = (part: number, whole: number): string => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');
const gbps = (bytes: number, ns: number): string => (ns > 0 ? `${(bytes / ns).toFixed(2)} GB/s` : 'n/a');

/** "4 B × 1200, 4.0 MiB × 6" for the most frequent sizes. */
function sizeList(sizes: Map<number, number>, n = 4): string {
  const top = [...sizes.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0]);
  const head = top.slice(0, n).map(([b, k]) => `${Number.isNaN(b) ? 'unknown size' : formatBytes(b)} × ${k}`);
  return top.length > n ? `${head.join(', ')} and ${top.length - n} more sizes` : head.join(', ');
}

/** The ops that issued a set of copies, most frequent first. */
function opsOf(ctx: AnalysisContext, idx: number[]): string | undefined {
  const counts = new Map<string, number>();
  for (const i of idx) {
    const op = ctx.model.copies.get(i, 'op');
    if (op >= 0) counts.set(ctx.model.opNames[op]!, (counts.get(ctx.model.opNames[op]!) ?? 0) + 1);
  }
  if (counts.size === 0) return undefined;
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([n, k]) => `${n} (${k}×)`).join(', ');
}

function sum(idx: number[], f: (i: number) => number): number {
  let s = 0;
  for (const i of idx) s += f(i);
  return s;
}

/** pageable-copy and d2h-to-pageable: recurring copies between the device and pageable host memory. */
function pageableRule(id: string, dir: number): Rule {
  return {
    id,
    run(ctx) {
      const c = ctx.model.copies;
      const all: number[] = [];
      for (let i = 0; i < c.length; i++) if (c.get(i, 'dir') === dir && ctx.hostKind[i] === MemKind.pageable) all.push(i);
      const unknown = ctx.model.hostKindUnknown;
      if (all.length === 0) return unknown > 0 && ctx.copyCount > 0 ? { notApplicable: `${unknown} host copies of unknown host memory kind` } : undefined;
      const bySize = new Map<number, number>();
      for (const i of all) bySize.set(c.get(i, 'bytes'), (bySize.get(c.get(i, 'bytes')) ?? 0) + 1);
      const idx = all.filter((i) => bySize.get(c.get(i, 'bytes'))! >= RECURRING);
      if (idx.length === 0) return undefined;
      const recurring = new Map([...bySize].filter(([, k]) => k >= RECURRING));
      const timeNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
      const bytes = sum(idx, (i) => c.get(i, 'bytes'));
      const saving = sum(idx, (i) => Math.max(0, c.get(i, 'end') - c.get(i, 'start') - ctx.pinnedTimeNs(i)));
      const largest = idx.reduce((a, i) => (c.get(i, 'bytes') > c.get(a, 'bytes') ? i : a), idx[0]!);
      const name = DIRECTIONS[dir];
      const evidence = [
        `${idx.length} ${name} copies ${dir === Direction.HtoD ? 'from' : 'to'} pageable host memory in ${recurring.size} recurring sizes: ${sizeList(recurring)}`,
        `${formatNs(timeNs)} on the copy engine for ${formatBytes(bytes)}; the largest (${formatBytes(c.get(largest, 'bytes'))}) ran at ${gbps(c.get(largest, 'bytes'), c.get(largest, 'end') - c.get(largest, 'start'))} against ${ctx.pinnedRate(dir)} GB/s from pinned memory`,
      ];
      const ops = opsOf(ctx, idx);
      if (ops) evidence.push(`issued by ${ops}`);
      const once = all.length - idx.length;
      if (once > 0) evidence.push(`${once} one-time pageable ${name} copies (sizes seen fewer than ${RECURRING} times: setup or model loading) are not counted`);
      return {
        rule: id,
        severity: severityOf(saving, ctx.spanNs),
        title: dir === Direction.HtoD ? 'Recurring copies from pageable host memory' : 'Recurring device-to-host copies into pageable memory',
        count: idx.length,
        bytes,
        timeNs,
        estimatedSavingNs: saving,
        savingHow: `each copy's measured time minus what it takes from pinned memory: ${ctx.floorText(dir)} plus its bytes at ${ctx.pinnedRate(dir)} GB/s`,
        evidence,
        change:
          dir === Direction.HtoD
            ? 'Allocate the host buffers pinned (DataLoader(pin_memory=True), tensor.pin_memory(), cudaHostAlloc / hipHostMalloc, or gpumem\'s PinnedResource) and copy with non_blocking=True: a pageable copy is staged through a driver bounce buffer and blocks the host.'
            : 'Copy into a pinned buffer allocated once (torch.empty(..., pin_memory=True) and .copy_(x, non_blocking=True)), then wait on an event before reading it: a copy into pageable memory is staged and synchronous.',
      };
    },
  };
}

/** A finding from a tool's aggregate table (calls and total time per function): no saving can be computed from totals. */
function aggregateFinding(rule: string, severity: Severity, title: string, rows: AggregateApi[], cannotTell: string, change: string): Finding {
  return {
    rule,
    severity,
    title,
    count: rows.reduce((s, a) => s + a.calls, 0),
    bytes: null,
    timeNs: rows.reduce((s, a) => s + a.totalNs, 0),
    estimatedSavingNs: 0,
    savingHow: `not computed: aggregate statistics cannot tell ${cannotTell}`,
    evidence: rows.map((a) => `${a.name}: ${a.calls} calls, ${formatNs(a.totalNs)}`),
    change,
  };
}

/** Indices of runtime calls per thread, in time order. */
function runtimeByThread(ctx: AnalysisContext): Map<number, number[]> {
  const r = ctx.model.runtime;
  const by = new Map<number, number[]>();
  for (let i = 0; i < r.length; i++) {
    const t = r.get(i, 'thread');
    let a = by.get(t);
    if (!a) by.set(t, (a = []));
    a.push(i);
  }
  for (const a of by.values()) a.sort((x, y) => r.get(x, 'start') - r.get(y, 'start'));
  return by;
}

const smallCopies: Rule = {
  id: 'small-copies',
  run(ctx) {
    const c = ctx.model.copies;
    const idx: number[] = [];
    for (let i = 0; i < c.length; i++) {
      const b = c.get(i, 'bytes');
      if (b < SMALL_COPY_BYTES && (c.get(i, 'dir') === Direction.HtoD || c.get(i, 'dir') === Direction.DtoH)) idx.push(i);
    }
    if (c.length > 0 && idx.length === 0 && Number.isNaN(c.get(0, 'bytes'))) return { notApplicable: 'the trace does not record copy sizes' };
    if (idx.length < SMALL_COPY_COUNT) return undefined;
    idx.sort((a, b) => c.get(a, 'start') - c.get(b, 'start'));
    // bursts: runs of small copies in one direction with no kernel between them; batched, each is one copy
    const bursts: Array<{ dir: number; bytes: number; n: number }> = [];
    let prev = -1;
    for (const i of idx) {
      const dir = c.get(i, 'dir');
      const last = bursts[bursts.length - 1];
      const kernelBetween = prev >= 0 && coveredWithin(ctx.kernelBusy.get(c.get(i, 'device')) ?? ctx.allKernels, c.get(prev, 'end'), c.get(i, 'start')) > 0;
      if (!last || last.dir !== dir || kernelBetween) bursts.push({ dir, bytes: c.get(i, 'bytes'), n: 1 });
      else {
        last.bytes += c.get(i, 'bytes');
        last.n++;
      }
      prev = i;
    }
    const deviceNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
    const issueNs = sum(idx, (i) => ctx.issueNs(i));
    const bytes = sum(idx, (i) => c.get(i, 'bytes'));
    const issues = idx.map((i) => ctx.issueNs(i)).sort((a, b) => a - b);
    const medianIssue = issues[issues.length >> 1] ?? 0;
    const batched = bursts.reduce((s, b) => s + ctx.floorNs[b.dir]! + b.bytes / ctx.pinnedRate(b.dir) + medianIssue, 0);
    const saving = Math.max(0, deviceNs + issueNs - batched);
    const sizes = new Map<number, number>();
    for (const i of idx) sizes.set(c.get(i, 'bytes'), (sizes.get(c.get(i, 'bytes')) ?? 0) + 1);
    const evidence = [
      `${idx.length} copies under ${formatBytes(SMALL_COPY_BYTES)}: ${sizeList(sizes)}; ${formatBytes(bytes)} in all`,
      `${formatNs(deviceNs)} on the copy engine${issueNs > 0 ? ` and ${formatNs(issueNs)} in the runtime calls that issued them` : ''}: ${formatNs((deviceNs + issueNs) / idx.length)} per copy for ${formatBytes(bytes / idx.length)} on average`,
      `they fall into ${bursts.length} bursts between kernels; batched, each burst is one copy`,
    ];
    const ops = opsOf(ctx, idx);
    if (ops) evidence.push(`issued by ${ops}`);
    return {
      rule: 'small-copies',
      severity: severityOf(saving, ctx.spanNs),
      title: 'Many small copies: batch them',
      count: idx.length,
      bytes,
      timeNs: deviceNs + issueNs,
      estimatedSavingNs: saving,
      savingHow: `copy-engine plus issuing time of the small copies, minus one copy per burst (${bursts.length}): ${ctx.floorText(Direction.HtoD)}, the burst's bytes at the pinned rate, and the median issuing call`,
      evidence,
      change: 'Pack small tensors into one buffer (torch.cat into a preallocated pinned staging tensor, or one struct) and copy it once per step; keep scalars such as counters, masks or learning rates on the device instead of uploading them.',
    };
  },
};

const syncStorm: Rule = {
  id: 'sync-storm',
  run(ctx) {
    const r = ctx.model.runtime;
    const counts = { streamSync: 0, deviceSync: 0, eventSync: 0 };
    let blockedNs = 0;
    let afterCopy = 0;
    let afterCopyNs = 0;
    let n = 0;
    for (const calls of runtimeByThread(ctx).values()) {
      for (let k = 0; k < calls.length; k++) {
        const i = calls[k]!;
        const api = r.get(i, 'api');
        if (api !== Api.streamSync && api !== Api.deviceSync && api !== Api.eventSync) continue;
        n++;
        counts[api === Api.streamSync ? 'streamSync' : api === Api.deviceSync ? 'deviceSync' : 'eventSync']++;
        const d = r.get(i, 'end') - r.get(i, 'start');
        blockedNs += d;
        const prevApi = k > 0 ? r.get(calls[k - 1]!, 'api') : -1;
        if (prevApi === Api.memcpyAsync || prevApi === Api.memcpySync) {
          afterCopy++;
          afterCopyNs += d;
        }
      }
    }
    const agg = ctx.model.aggregateApis.filter((a) => /Synchronize$|signal_wait/i.test(a.name));
    if (n === 0 && agg.length > 0) {
      if (agg.reduce((s, a) => s + a.calls, 0) < SYNC_STORM_COUNT) return undefined;
      return aggregateFinding('sync-storm', 'medium', 'Many host synchronisations (from aggregate statistics)', agg, 'which synchronisations wait on copies', 'Synchronise once per step at most: non_blocking copies from pinned memory, events instead of stream or device synchronisation, metrics read back every N steps.');
    }
    if (n < SYNC_STORM_COUNT) return undefined;
    const items = (ctx.model.cpuOps.get('aten::item') ?? 0) + (ctx.model.cpuOps.get('aten::tolist') ?? 0);
    const evidence = [
      `${n} blocking synchronisations (${counts.streamSync} stream, ${counts.deviceSync} device, ${counts.eventSync} event) held the host for ${formatNs(blockedNs)}, one every ${formatNs(ctx.spanNs / n)} on average`,
      `${afterCopy} of them come straight after a copy call (${formatNs(afterCopyNs)}): a copy from pageable memory, or without non_blocking=True, waits for the stream`,
    ];
    if (items > 0) evidence.push(`aten::item / tolist ran ${items}× — each reads a value back and waits for the device`);
    return {
      rule: 'sync-storm',
      severity: severityOf(afterCopyNs, ctx.spanNs),
      title: 'The host synchronises with the device after copies',
      count: n,
      bytes: null,
      timeNs: blockedNs,
      estimatedSavingNs: afterCopyNs,
      savingHow: 'the host time blocked in the synchronisations that directly follow a copy call (overlaps the pageable-copy and small-copies savings: not additive)',
      evidence,
      change: 'Copy with non_blocking=True from pinned memory; accumulate losses and metrics on the device and call .item() / .cpu() every N steps, not every step; where order matters, record an event and wait on it instead of synchronising the stream or device.',
    };
  },
};

const syncCopy: Rule = {
  id: 'sync-copy',
  run(ctx) {
    const r = ctx.model.runtime;
    const idx: number[] = [];
    for (let i = 0; i < r.length; i++) if (r.get(i, 'api') === Api.memcpySync) idx.push(i);
    if (idx.length < RECURRING) return undefined;
    const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start'));
    return {
      rule: 'sync-copy',
      severity: severityOf(t, ctx.spanNs),
      title: 'Synchronous copy calls block the host',
      count: idx.length,
      bytes: null,
      timeNs: t,
      estimatedSavingNs: t,
      savingHow: 'host time spent inside synchronous memcpy calls, which an asynchronous copy returns immediately from (an upper bound: the host may have nothing else to do)',
      evidence: [`${idx.length} synchronous memcpy calls (cudaMemcpy / hipMemcpy and kin) held the host ${formatNs(t)}`],
      change: 'Use cudaMemcpyAsync / hipMemcpyAsync on a stream, from pinned memory, and wait on an event only when the data is needed.',
    };
  },
};

const exposedCopy: Rule = {
  id: 'exposed-copy',
  run(ctx) {
    if (ctx.model.kernels.length === 0) return ctx.copyCount > 0 ? { notApplicable: 'the trace has no kernels to overlap copies with' } : undefined;
    const c = ctx.model.copies;
    const idx: number[] = [];
    let outside = 0;
    for (let i = 0; i < c.length; i++) {
      if (c.get(i, 'dir') !== Direction.HtoD && c.get(i, 'dir') !== Direction.DtoH) continue;
      // only copies inside the compute phase: uploads before the first kernel or after the last are setup or teardown
      const busy = ctx.kernelBusy.get(c.get(i, 'device'));
      if (busy && c.get(i, 'end') > busy.start[0]! && c.get(i, 'start') < busy.end[busy.end.length - 1]!) idx.push(i);
      else outside++;
    }
    if (idx.length === 0) return undefined;
    const timeNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
    const overlapped = sum(idx, (i) => ctx.overlapNs(i));
    const exposed = timeNs - overlapped;
    if (exposed < Math.max(1e6, 0.02 * ctx.spanNs)) return undefined;
    const kernelBusy = [...ctx.kernelBusy.values()].reduce((s, u) => s + unionLength(u), 0);
    const saving = Math.max(0, Math.min(exposed, kernelBusy - overlapped));
    const copyStreams = new Set(idx.map((i) => c.get(i, 'stream')));
    const kernelStreams = new Set(Array.from(ctx.model.kernels.col('stream')));
    const shared = [...copyStreams].filter((s) => kernelStreams.has(s));
    const evidence = [
      `${idx.length} host copies during the compute phase took ${formatNs(timeNs)}; ${formatNs(exposed)} (${pct(exposed, timeNs)}) of it ran while no kernel ran on the device`,
      shared.length === copyStreams.size
        ? `copies and kernels share stream${shared.length > 1 ? 's' : ''} ${shared.join(', ')}: a one-stream pipeline runs them one after the other`
        : `copies run on stream(s) ${[...copyStreams].join(', ')}, kernels on ${[...kernelStreams].join(', ')}, yet the copies are not hidden: the next batch is not fetched while the current one computes`,
    ];
    if (outside > 0) evidence.push(`${outside} copies before the first kernel or after the last are setup or teardown and not counted`);
    return {
      rule: 'exposed-copy',
      severity: severityOf(saving, ctx.spanNs),
      title: 'Copies are not overlapped with compute',
      count: idx.length,
      bytes: sum(idx, (i) => c.get(i, 'bytes')) || null,
      timeNs,
      estimatedSavingNs: saving,
      savingHow: `the copies' time outside kernels, capped by the kernel time (${formatNs(kernelBusy)}) not already overlapped: what double-buffering could hide`,
      evidence,
      change: "Copy the next batch on a side stream while the current step computes (pinned memory, non_blocking=True, torch.cuda.Stream with wait_stream / record_stream, or a DataLoader prefetcher): double-buffer the input.",
    };
  },
};

/** Steady state: after the first fifth of the trace, where warm-up allocations are over. */
function steadyFrom(ctx: AnalysisContext): number {
  return ctx.span[0] + 0.2 * ctx.spanNs;
}

function churnRule(id: string, apis: number[], host: boolean): Rule {
  return {
    id,
    run(ctx) {
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
        return aggregateFinding(id, 'low', host ? 'Pinned memory allocated many times (aggregate statistics)' : 'Many device allocations (aggregate statistics)', aggregate, 'steady-state allocations from warm-up', host ? 'Allocate pinned buffers once and reuse them.' : 'Keep memory in a caching pool rather than allocating and freeing it every step.');
      }
      const t = sum(idx, (i) => r.get(i, 'end') - r.get(i, 'start'));
      const poolHitNs = 300;
      const saving = Math.max(0, t - idx.length * (host ? 0 : poolHitNs));
      return {
        rule: id,
        severity: severityOf(saving, ctx.spanNs),
        title: host ? 'Pinned host memory is allocated and freed in the steady state' : 'Device memory is allocated and freed in the steady state',
        count: Math.max(idx.length, events),
        bytes: null,
        timeNs: t,
        estimatedSavingNs: saving,
        savingHow: idx.length > 0
          ? host
            ? 'host time inside the pinned allocation and free calls after warm-up (reused buffers cost nothing per step)'
            : `host time inside the allocation and free calls after warm-up, minus ${poolHitNs} ns per call for a pool hit (gpumem's pool measured 0.13-0.28 µs per allocate + free on the H200 machine)`
          : 'not computed: the trace records allocations but not the calls\' durations',
        evidence: [
          `${Math.max(idx.length, events)} ${host ? 'pinned host' : 'device'} allocations and frees after the first fifth of the trace (warm-up excluded)${idx.length > 0 ? `, ${formatNs(t)} in the calls` : ''}`,
        ],
        change: host
          ? "Allocate pinned buffers once and reuse them (a staging ring, gpumem's PinnedResource behind a CachingPool): pinning pages costs milliseconds (gpumem bench measured 27-33 ms to allocate and free 64 MiB of pinned memory on the H200 machine)."
          : "Keep memory in a caching pool: PyTorch's caching allocator (no torch.cuda.empty_cache() in the loop), cudaMallocAsync / hipMallocAsync with a memory pool release threshold, or gpumem's CachingPool.",
      };
    },
  };
}

const managedFaults: Rule = {
  id: 'managed-faults',
  run(ctx) {
    const f = ctx.model.faults;
    const c = ctx.model.copies;
    const mig: number[] = [];
    for (let i = 0; i < c.length; i++) if (c.get(i, 'src') === MemKind.managed || c.get(i, 'dst') === MemKind.managed) mig.push(i);
    if (f.length === 0 && mig.length === 0) return undefined;
    let gpu = 0;
    let cpu = 0;
    let faultNs = 0;
    const pages = new Map<number, number>();
    for (let i = 0; i < f.length; i++) {
      const kind = f.get(i, 'kind');
      if (kind === 1) {
        gpu++;
        faultNs += f.get(i, 'duration');
      } else cpu++;
      const page = Math.floor(f.get(i, 'address') / (2 * MiB));
      if (Number.isFinite(page)) pages.set(page, (pages.get(page) ?? 0) | (kind === 1 ? 2 : 1));
    }
    const pingPong = [...pages.values()].filter((v) => v === 3).length;
    const migNs = sum(mig, (i) => c.get(i, 'end') - c.get(i, 'start'));
    const migBytes = sum(mig, (i) => c.get(i, 'bytes') || 0);
    const prefetchNs = migBytes / ctx.pinnedRate(Direction.HtoD);
    const saving = Math.max(0, migNs + faultNs - prefetchNs);
    const evidence = [`${gpu} GPU page-fault groups (${formatNs(faultNs)}) and ${cpu} CPU page faults on managed memory`];
    if (mig.length > 0) evidence.push(`${mig.length} on-demand migrations moved ${formatBytes(migBytes)} in ${formatNs(migNs)} (${gbps(migBytes, migNs)})`);
    if (pingPong > 0) evidence.push(`${pingPong} 2 MiB regions faulted on both the CPU and the GPU: pages ping-pong between them`);
    return {
      rule: 'managed-faults',
      severity: severityOf(saving, ctx.spanNs),
      title: 'Managed memory migrates on page faults',
      count: gpu + cpu + mig.length,
      bytes: migBytes || null,
      timeNs: migNs + faultNs,
      estimatedSavingNs: saving,
      savingHow: `migration and GPU fault time minus moving the same bytes in bulk at ${ctx.pinnedRate(Direction.HtoD)} GB/s (a prefetch)`,
      evidence,
      change: 'Prefetch managed ranges before the kernels that use them (cudaMemPrefetchAsync / hipMemPrefetchAsync) and back before the CPU reads them; advise read-mostly data (SetReadMostly) and a preferred location to stop ping-pong. On AMD, with XNACK off, managed memory does not migrate on fault: prefetch or use device memory.',
    };
  },
};

const redundantCopy: Rule = {
  id: 'redundant-copy',
  run(ctx) {
    const c = ctx.model.copies;
    const groups = new Map<string, number[]>();
    let withAddr = 0;
    for (let i = 0; i < c.length; i++) {
      if (c.get(i, 'dir') !== Direction.HtoD || Number.isNaN(c.get(i, 'hostAddr'))) continue;
      withAddr++;
      const key = `${c.get(i, 'hostAddr')}:${c.get(i, 'bytes')}`;
      const g = groups.get(key);
      if (g) g.push(i);
      else groups.set(key, [i]);
    }
    if (withAddr === 0) return ctx.copyCount > 0 ? { notApplicable: 'the trace does not record the host address of copies, so the same buffer uploaded again cannot be told from new data of the same size' } : undefined;
    const again = [...groups.values()].filter((g) => g.length >= RECURRING && c.get(g[0]!, 'bytes') >= 64 * KiB);
    if (again.length === 0) return undefined;
    const repeats = again.flatMap((g) => g.slice(1));
    const t = sum(repeats, (i) => c.get(i, 'end') - c.get(i, 'start'));
    return {
      rule: 'redundant-copy',
      severity: severityOf(t, ctx.spanNs),
      title: 'The same host buffer is uploaded again and again',
      count: repeats.length,
      bytes: sum(repeats, (i) => c.get(i, 'bytes')),
      timeNs: t,
      estimatedSavingNs: t,
      savingHow: 'the time of every upload of a buffer after its first (if its contents did not change, which the trace cannot show)',
      evidence: again.slice(0, 5).map((g) => `host buffer 0x${c.get(g[0]!, 'hostAddr').toString(16)} (${formatBytes(c.get(g[0]!, 'bytes'))}) uploaded ${g.length} times`),
      change: 'Keep data that does not change on the device (upload once, reuse the device tensor); if it changes partly, upload only the changed part.',
    };
  },
};

const lowBandwidth: Rule = {
  id: 'low-bandwidth',
  run(ctx) {
    const c = ctx.model.copies;
    const idx: number[] = [];
    let unknownKind = 0;
    for (let i = 0; i < c.length; i++) {
      const dir = c.get(i, 'dir');
      const kind = ctx.hostKind[i];
      if ((dir !== Direction.HtoD && dir !== Direction.DtoH) || !(c.get(i, 'bytes') >= MiB)) continue;
      if (kind !== MemKind.pinned && kind !== MemKind.unknown) continue;
      const rate = c.get(i, 'bytes') / (c.get(i, 'end') - c.get(i, 'start'));
      if (rate < 0.5 * ctx.pinnedRate(dir)) {
        idx.push(i);
        if (kind === MemKind.unknown) unknownKind++;
      }
    }
    if (idx.length === 0) return undefined;
    const t = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
    const bytes = sum(idx, (i) => c.get(i, 'bytes'));
    const saving = sum(idx, (i) => Math.max(0, c.get(i, 'end') - c.get(i, 'start') - ctx.pinnedTimeNs(i)));
    const evidence = [`${idx.length} host copies of 1 MiB or more ran below half the expected rate: ${formatBytes(bytes)} in ${formatNs(t)} (${gbps(bytes, t)} against ${ctx.rates.HtoD} / ${ctx.rates.DtoH} GB/s)`];
    if (unknownKind > 0) evidence.push(`${unknownKind} of them have unknown host memory kind: on ROCm a slow copy is most often from pageable memory`);
    return {
      rule: 'low-bandwidth',
      severity: severityOf(saving, ctx.spanNs),
      title: 'Large copies run far below the link rate',
      count: idx.length,
      bytes,
      timeNs: t,
      estimatedSavingNs: saving,
      savingHow: `each copy's time minus its bytes at the stated pinned rate plus ${ctx.floorText(Direction.HtoD)}`,
      evidence,
      change: "Check the link (gpumem info shows the PCIe generation and width the GPU trained at), allocate pinned buffers on the GPU's NUMA node (numactl --membind, or hipHostMalloc's NUMA flags), make sure the memory is really pinned, and avoid several copies in one direction at once.",
    };
  },
};

const gpuIdleOnMemory: Rule = {
  id: 'gpu-idle-on-memory',
  run(ctx) {
    const m = ctx.model;
    if (m.kernels.length < 2) return undefined;
    const c = m.copies;
    const r = m.runtime;
    let idleNs = 0;
    let waitingNs = 0;
    for (const [dev, busy] of ctx.kernelBusy) {
      const lo = busy.start[0]!;
      const hi = busy.end[busy.end.length - 1]!;
      idleNs += hi - lo - unionLength(busy);
      // memory work: copies and memsets on this device, and the host blocked in synchronisation or synchronous copies
      const memStarts: number[] = [];
      const memEnds: number[] = [];
      for (let i = 0; i < c.length; i++) if (c.get(i, 'device') === dev) memStarts.push(c.get(i, 'start')), memEnds.push(c.get(i, 'end'));
      for (let i = 0; i < m.memsets.length; i++) if (m.memsets.get(i, 'device') === dev) memStarts.push(m.memsets.get(i, 'start')), memEnds.push(m.memsets.get(i, 'end'));
      for (let i = 0; i < r.length; i++) if (AnalysisContext.isBlocking(r.get(i, 'api'))) memStarts.push(r.get(i, 'start')), memEnds.push(r.get(i, 'end'));
      const mem = unionOf(Float64Array.from(memStarts), Float64Array.from(memEnds));
      for (let g = 0; g + 1 < busy.start.length; g++) {
        const a = busy.end[g]!;
        const b = busy.start[g + 1]!;
        waitingNs += coveredWithin(mem, a, b);
      }
    }
    const region = [...ctx.kernelBusy.values()].reduce((s, u) => s + (u.end[u.end.length - 1]! - u.start[0]!), 0);
    if (waitingNs < Math.max(1e5, 0.05 * region)) return undefined;
    return {
      rule: 'gpu-idle-on-memory',
      severity: severityOf(waitingNs, ctx.spanNs),
      title: 'The GPU sits idle while memory work runs',
      count: m.kernels.length,
      bytes: null,
      timeNs: idleNs,
      estimatedSavingNs: waitingNs,
      savingHow: 'gaps between kernels during which only copies, memsets or host synchronisation ran (an upper bound that overlaps exposed-copy and sync-storm: not additive)',
      evidence: [`between its first and last kernel the GPU was idle ${formatNs(idleNs)} of ${formatNs(region)} (${pct(idleNs, region)}); ${formatNs(waitingNs)} of those gaps were filled only by memory work or host waits`],
      change: 'Take the memory work off the critical path: prefetch inputs on a side stream, drop per-step synchronisation, and keep allocations in a pool; the other findings say which of these applies.',
    };
  },
};

const fragmentation: Rule = {
  id: 'fragmentation',
  run(ctx) {
    const m = ctx.model;
    const seg = m.segments;
    let reserved = 0;
    let allocated = 0;
    let inactive = 0;
    let blocks = 0;
    for (const s of seg) {
      reserved += s.totalBytes;
      allocated += s.allocatedBytes;
      inactive += s.inactiveSplitBytes;
      blocks += s.inactiveSplitBlocks;
    }
    // Kineto [memory] events: the caching allocator's totals over time
    let peakReserved = 0;
    let peakAllocated = 0;
    const a = m.allocs;
    for (let i = 0; i < a.length; i++) {
      if (a.get(i, 'reserved') > peakReserved) peakReserved = a.get(i, 'reserved');
      if (a.get(i, 'allocated') > peakAllocated) peakAllocated = a.get(i, 'allocated');
    }
    const evidence: string[] = [];
    let held = 0;
    let how = '';
    if (seg.length > 0 && reserved > 0) {
      evidence.push(`${seg.length} segments reserve ${formatBytes(reserved)} for ${formatBytes(allocated)} allocated (${pct(allocated, reserved)})`);
      if (inactive > 0) evidence.push(`${formatBytes(inactive)} sits in ${blocks} free blocks inside segments that also hold live blocks: split blocks no request of another size can use`);
      held = inactive;
      how = 'free blocks stranded inside segments that hold live blocks';
    }
    if (peakReserved > 0 && peakAllocated > 0) {
      evidence.push(`the caching allocator peaked at ${formatBytes(peakReserved)} reserved for ${formatBytes(peakAllocated)} allocated (${pct(peakAllocated, peakReserved)})`);
      if (peakReserved - peakAllocated > held) {
        held = peakReserved - peakAllocated;
        how = 'peak reserved beyond peak allocated';
      }
    }
    if (m.ooms > 0) evidence.push(`${m.ooms} out-of-memory events`);
    const bad = m.ooms > 0 || (held >= 64 * MiB && (held >= 0.1 * Math.max(reserved, peakReserved) || held >= GiB));
    if (!bad) return undefined;
    return {
      rule: 'fragmentation',
      severity: m.ooms > 0 ? 'high' : held >= GiB ? 'medium' : 'low',
      title: 'The allocator holds memory it cannot use',
      count: blocks || m.ooms,
      bytes: held,
      timeNs: 0,
      estimatedSavingNs: 0,
      savingHow: `memory, not time: ${formatBytes(held)} of ${how || 'memory reserved and unusable'}`,
      evidence,
      change: "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or use gpumem's growable pool) so segments grow in place instead of splitting; compare configurations on this very trace with `gpumem pool replay SNAPSHOT`.",
    };
  },
};

/** Every rule, in the order their findings are explained. */
export const RULES: readonly Rule[] = [
  pageableRule('pageable-copy', Direction.HtoD),
  syncCopy,
  pageableRule('d2h-to-pageable', Direction.DtoH),
  smallCopies,
  exposedCopy,
  syncStorm,
  churnRule('alloc-churn', [Api.malloc, Api.free], false),
  churnRule('pinned-alloc-churn', [Api.hostAlloc, Api.hostFree], true),
  managedFaults,
  redundantCopy,
  lowBandwidth,
  gpuIdleOnMemory,
  fragmentation,
];
