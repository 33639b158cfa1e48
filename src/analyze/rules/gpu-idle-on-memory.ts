/** gpu-idle-on-memory: the GPU idle while memory operations run. */
import { formatNs } from '../../units.js';
import { AnalysisContext } from '../context.js';
import { coveredWithin, unionLength, unionOf } from '../intervals.js';
import { pct, severityOf, type RuleCheck } from './shared.js';

export const gpuIdleOnMemory: RuleCheck = (ctx) => {
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
    for (let i = 0; i < m.memsets.length; i++)
      if (m.memsets.get(i, 'device') === dev) memStarts.push(m.memsets.get(i, 'start')), memEnds.push(m.memsets.get(i, 'end'));
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
    severity: severityOf(waitingNs, ctx.spanNs),
    title: 'The GPU sits idle while memory work runs',
    count: m.kernels.length,
    bytes: null,
    timeNs: idleNs,
    estimatedSavingNs: waitingNs,
    savingHow:
      'gaps between kernels during which only copies, memsets or host synchronisation ran (an upper bound that overlaps exposed-copy and sync-storm: not additive)',
    evidence: [
      `between its first and last kernel the GPU was idle ${formatNs(idleNs)} of ${formatNs(region)} (${pct(idleNs, region)}); ${formatNs(waitingNs)} of those gaps were filled only by memory work or host waits`,
    ],
    change:
      'Take the memory work off the critical path: prefetch inputs on a side stream, drop per-step synchronisation, and keep allocations in a pool; the other findings say which of these applies.',
  };
};
