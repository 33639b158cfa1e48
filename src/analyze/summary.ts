/** The summary of a trace's memory activity: copies by direction and host kind, overlap, syncs, allocations. */
import { AnalysisContext } from './context.js';
import { unionLength } from './intervals.js';
import { Api, AllocLevel, classifyApi, DIRECTIONS, MEM_KINDS, MIGRATION_CAUSES, type TraceModel } from './model.js';
import type { CopyGroup, DeviceFigures, Summary } from './result.js';

/** Sums a column, or null when every value is NaN (the trace never records it). */
function knownSum(values: Float64Array): number | null {
  let s = 0;
  let any = false;
  for (const v of values) {
    if (Number.isNaN(v)) continue;
    s += v;
    any = true;
  }
  return any ? s : null;
}

/** Each GPU's figures, where the trace holds more than one. */
function perDevice(ctx: AnalysisContext): DeviceFigures[] {
  const m = ctx.model;
  const figures = new Map<number, DeviceFigures & { lo: number; hi: number }>();
  const of = (device: number) => {
    let f = figures.get(device);
    if (!f)
      figures.set(
        device,
        (f = {
          device,
          name: m.devices.get(device) ?? null,
          spanNs: 0,
          kernels: { count: 0, timeNs: 0, busyNs: 0 },
          busyFraction: null,
          copies: { count: 0, bytes: null, timeNs: 0 },
          memsets: 0,
          lo: Infinity,
          hi: -Infinity,
        }),
      );
    return f;
  };
  const seen = (f: { lo: number; hi: number }, start: number, end: number): void => {
    f.lo = Math.min(f.lo, start);
    f.hi = Math.max(f.hi, end);
  };
  const k = m.kernels;
  for (let i = 0; i < k.length; i++) {
    const f = of(k.get(i, 'device'));
    f.kernels.count++;
    f.kernels.timeNs += k.get(i, 'end') - k.get(i, 'start');
    seen(f, k.get(i, 'start'), k.get(i, 'end'));
  }
  const c = m.copies;
  for (let i = 0; i < c.length; i++) {
    const f = of(c.get(i, 'device'));
    f.copies.count++;
    f.copies.timeNs += c.get(i, 'end') - c.get(i, 'start');
    const b = c.get(i, 'bytes');
    if (!Number.isNaN(b)) f.copies.bytes = (f.copies.bytes ?? 0) + b;
    seen(f, c.get(i, 'start'), c.get(i, 'end'));
  }
  for (let i = 0; i < m.memsets.length; i++) {
    const f = of(m.memsets.get(i, 'device'));
    f.memsets++;
    seen(f, m.memsets.get(i, 'start'), m.memsets.get(i, 'end'));
  }
  if (figures.size < 2) return [];
  return [...figures.values()]
    .sort((a, b) => a.device - b.device)
    .map(({ lo, hi, ...f }) => {
      const busy = ctx.kernelBusy.get(f.device);
      const spanNs = Math.max(0, hi - lo);
      const busyNs = busy ? unionLength(busy) : 0;
      return { ...f, spanNs, kernels: { ...f.kernels, busyNs }, busyFraction: spanNs > 0 ? +(busyNs / spanNs).toFixed(4) : null };
    });
}

/** Unified-memory migrations grouped by cause and direction, most time first. */
function migrationGroups(m: TraceModel): Summary['migrations'] {
  const g = m.migrations;
  const groups = new Map<string, Summary['migrations'][number]>();
  for (let i = 0; i < g.length; i++) {
    const cause = MIGRATION_CAUSES[g.get(i, 'cause')] ?? 'unknown';
    const direction = DIRECTIONS[g.get(i, 'dir')] ?? 'unknown';
    const key = `${cause}/${direction}`;
    let x = groups.get(key);
    if (!x) groups.set(key, (x = { cause, direction, count: 0, bytes: 0, timeNs: 0 }));
    x.count++;
    x.bytes += g.get(i, 'bytes') || 0;
    x.timeNs += g.get(i, 'end') - g.get(i, 'start');
  }
  return [...groups.values()].sort((a, b) => b.timeNs - a.timeNs);
}

export function summarize(ctx: AnalysisContext, notApplicable: Summary['notApplicable']): Summary {
  const m = ctx.model;
  const c = m.copies;
  const groups = new Map<string, CopyGroup & { knownBytes: number; knownNs: number }>();
  let overlapped = 0;
  let copyNs = 0;
  for (let i = 0; i < c.length; i++) {
    const dir = DIRECTIONS[c.get(i, 'dir')] ?? 'unknown';
    const kind = MEM_KINDS[ctx.hostKind[i]!] ?? 'unknown';
    const key = `${dir}/${kind}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { direction: dir, hostKind: kind, count: 0, bytes: null, timeNs: 0, achievedGBps: null, knownBytes: 0, knownNs: 0 }));
    const d = c.get(i, 'end') - c.get(i, 'start');
    const b = c.get(i, 'bytes');
    g.count++;
    g.timeNs += d;
    copyNs += d;
    if (!Number.isNaN(b)) {
      g.knownBytes += b;
      g.knownNs += d;
      g.bytes = (g.bytes ?? 0) + b;
    }
    overlapped += ctx.overlapNs(i);
  }
  // a tool's totals count as what they total: calls of copies, kernels and API calls with their time
  for (const a of m.aggregateCopies) {
    const key = `${a.direction}/unknown`;
    let g = groups.get(key);
    if (!g)
      groups.set(key, (g = { direction: a.direction, hostKind: 'unknown', count: 0, bytes: null, timeNs: 0, achievedGBps: null, knownBytes: 0, knownNs: 0 }));
    g.count += a.calls;
    g.timeNs += a.totalNs;
    copyNs += a.totalNs;
    if (a.bytes !== undefined) g.bytes = (g.bytes ?? 0) + a.bytes;
  }
  const aggregateCopyCalls = m.aggregateCopies.reduce((t, a) => t + a.calls, 0);
  const eventBytes = knownSum(c.col('bytes'));
  const aggregateBytes = m.aggregateCopies.some((a) => a.bytes !== undefined) ? m.aggregateCopies.reduce((t, a) => t + (a.bytes ?? 0), 0) : null;
  const copyGroups: CopyGroup[] = [...groups.values()]
    .map(({ knownBytes, knownNs, ...g }) => ({ ...g, achievedGBps: knownNs > 0 ? +(knownBytes / knownNs).toFixed(3) : null }))
    .sort((a, b) => b.timeNs - a.timeNs);

  const r = m.runtime;
  const syncs = { streamSync: 0, deviceSync: 0, eventSync: 0, memcpySync: 0, hostBlockedNs: 0, deviceRecords: m.syncs.length };
  const calls = { mallocCalls: 0, freeCalls: 0, hostAllocCalls: 0, hostFreeCalls: 0, managedAllocCalls: 0, vmmMapCalls: 0, vmmUnmapCalls: 0 };
  const count = (api: number, n: number, d: number): void => {
    if (api === Api.streamSync) syncs.streamSync += n;
    else if (api === Api.deviceSync) syncs.deviceSync += n;
    else if (api === Api.eventSync) syncs.eventSync += n;
    else if (api === Api.memcpySync) syncs.memcpySync += n;
    if (AnalysisContext.isBlocking(api)) syncs.hostBlockedNs += d;
    if (api === Api.malloc || api === Api.mallocAsync) calls.mallocCalls += n;
    else if (api === Api.free || api === Api.freeAsync) calls.freeCalls += n;
    else if (api === Api.hostAlloc) calls.hostAllocCalls += n;
    else if (api === Api.hostFree) calls.hostFreeCalls += n;
    else if (api === Api.mallocManaged) calls.managedAllocCalls += n;
    else if (api === Api.vmmMap) calls.vmmMapCalls += n;
    else if (api === Api.vmmUnmap) calls.vmmUnmapCalls += n;
  };
  for (let i = 0; i < r.length; i++) count(r.get(i, 'api'), 1, r.get(i, 'end') - r.get(i, 'start'));
  for (const x of m.aggregateApis) count(classifyApi(x.name), x.calls, x.totalNs);
  const a = m.allocs;
  let driverAllocEvents = 0;
  let frameworkAllocEvents = 0;
  let peakAllocated: number | null = null;
  let peakReserved: number | null = null;
  for (let i = 0; i < a.length; i++) {
    if (a.get(i, 'bytes') > 0) {
      if (a.get(i, 'level') === AllocLevel.driver) driverAllocEvents++;
      else frameworkAllocEvents++;
    }
    const al = a.get(i, 'allocated');
    const re = a.get(i, 'reserved');
    if (!Number.isNaN(al) && (peakAllocated === null || al > peakAllocated)) peakAllocated = al;
    if (!Number.isNaN(re) && (peakReserved === null || re > peakReserved)) peakReserved = re;
  }
  const seg = m.segments;
  let gpuFaults = 0;
  for (let i = 0; i < m.faults.length; i++) if (m.faults.get(i, 'kind') === 1) gpuFaults++;
  const k = m.kernels;
  let kernelNs = 0;
  for (let i = 0; i < k.length; i++) kernelNs += k.get(i, 'end') - k.get(i, 'start');
  let memsetNs = 0;
  for (let i = 0; i < m.memsets.length; i++) memsetNs += m.memsets.get(i, 'end') - m.memsets.get(i, 'start');
  return {
    files: [...m.files],
    rank: m.rank ?? null,
    formats: [...m.formats],
    devices: [...m.devices].map(([id, name]) => ({ id, name })),
    spanNs: ctx.spanNs,
    copies: {
      count: c.length + aggregateCopyCalls,
      bytes: eventBytes === null && aggregateBytes === null ? null : (eventBytes ?? 0) + (aggregateBytes ?? 0),
      timeNs: copyNs,
      groups: copyGroups,
      overlappedWithKernelsNs: overlapped,
      overlapFraction: copyNs > 0 && k.length > 0 ? +(overlapped / copyNs).toFixed(4) : null,
    },
    kernels: {
      count: k.length + m.aggregateKernels.reduce((t, a) => t + a.calls, 0),
      timeNs: kernelNs + m.aggregateKernels.reduce((t, a) => t + a.totalNs, 0),
      busyNs: [...ctx.kernelBusy.values()].reduce((s, u) => s + unionLength(u), 0),
      top: [
        ...[...m.kernelNames].map(([name, v]) => ({ name, count: v.count, timeNs: v.ns })),
        ...m.aggregateKernels.map((a) => ({ name: a.name, count: a.calls, timeNs: a.totalNs })),
      ]
        .sort((x, y) => y.timeNs - x.timeNs)
        .slice(0, 5),
    },
    memsets: {
      count: m.memsets.length + m.aggregateMemsets.reduce((t, a) => t + a.calls, 0),
      bytes: knownSum(m.memsets.col('bytes')),
      timeNs: memsetNs + m.aggregateMemsets.reduce((t, a) => t + a.totalNs, 0),
    },
    perDevice: perDevice(ctx),
    syncs,
    allocations: {
      ...calls,
      driverAllocEvents,
      frameworkAllocEvents,
      peakAllocatedBytes: peakAllocated,
      peakReservedBytes: peakReserved,
      ooms: m.ooms,
      segments:
        seg.length > 0
          ? {
              count: seg.length,
              reservedBytes: seg.reduce((s, x) => s + x.totalBytes, 0),
              allocatedBytes: seg.reduce((s, x) => s + x.allocatedBytes, 0),
              inactiveSplitBytes: seg.reduce((s, x) => s + x.inactiveSplitBytes, 0),
            }
          : null,
    },
    faults: m.recorded('faults') ? { gpu: gpuFaults, cpu: m.faults.length - gpuFaults } : { gpu: null, cpu: null },
    migrations: migrationGroups(m),
    cpuOps: Object.fromEntries(m.cpuOps),
    aggregates:
      m.aggregateCopies.length + m.aggregateApis.length + m.aggregateKernels.length + m.aggregateMemsets.length > 0
        ? {
            copies: m.aggregateCopies,
            apis: [...m.aggregateApis].sort((x, y) => y.totalNs - x.totalNs).slice(0, 15),
            kernels: [...m.aggregateKernels].sort((x, y) => y.totalNs - x.totalNs).slice(0, 15),
            memsets: m.aggregateMemsets,
          }
        : null,
    rates: ctx.rates,
    notes: [...m.notes],
    notApplicable,
  };
}
