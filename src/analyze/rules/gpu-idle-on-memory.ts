/** gpu-idle-on-memory: the GPU idle while memory operations run. */
import { formatNs } from '../../units.js';
import { coveredWithin, unionLength, unionOf, type Union } from '../intervals.js';
import { pct, severityOf, type RuleCheck } from './shared.js';

/** The pieces of `u` inside [a, b]. */
function piecesWithin(u: Union, a: number, b: number, out: { start: number[]; end: number[] }): void {
  for (let k = 0; k < u.start.length; k++) {
    const s = Math.max(a, u.start[k]!);
    const e = Math.min(b, u.end[k]!);
    if (e > s) out.start.push(s), out.end.push(e);
  }
}

export const gpuIdleOnMemory: RuleCheck = (ctx) => {
  const m = ctx.model;
  if (m.kernels.length < 2) return undefined;
  const c = m.copies;
  let idleNs = 0;
  let waitingNs = 0;
  let hideableNs = 0;
  const basis = { start: [] as number[], end: [] as number[] };
  for (const [dev, busy] of ctx.kernelBusy) {
    const lo = busy.start[0]!;
    const hi = busy.end[busy.end.length - 1]!;
    idleNs += hi - lo - unionLength(busy);
    // memory work: copies and memsets on this device. A host blocked in a call while the device runs nothing is
    // held by something else than memory work, and does not count
    const memStarts: number[] = [];
    const memEnds: number[] = [];
    for (let i = 0; i < c.length; i++) if (c.get(i, 'device') === dev) memStarts.push(c.get(i, 'start')), memEnds.push(c.get(i, 'end'));
    for (let i = 0; i < m.memsets.length; i++)
      if (m.memsets.get(i, 'device') === dev) memStarts.push(m.memsets.get(i, 'start')), memEnds.push(m.memsets.get(i, 'end'));
    const mem = unionOf(Float64Array.from(memStarts), Float64Array.from(memEnds));
    let waiting = 0;
    for (let g = 0; g + 1 < busy.start.length; g++) {
      const a = busy.end[g]!;
      const b = busy.start[g + 1]!;
      waiting += coveredWithin(mem, a, b);
      piecesWithin(mem, a, b, basis);
    }
    // memory work can only be hidden under kernel time that does not already run beside memory work: a copy engine
    // moves bytes at its own rate, so overlapping it with compute is all there is to win
    let busyBesideMemory = 0;
    for (let k = 0; k < busy.start.length; k++) busyBesideMemory += coveredWithin(mem, busy.start[k]!, busy.end[k]!);
    waitingNs += waiting;
    hideableNs += Math.min(waiting, unionLength(busy) - busyBesideMemory);
  }
  const region = [...ctx.kernelBusy.values()].reduce((s, u) => s + (u.end[u.end.length - 1]! - u.start[0]!), 0);
  const kernelNs = [...ctx.kernelBusy.values()].reduce((s, u) => s + unionLength(u), 0);
  if (waitingNs < Math.max(1e5, 0.05 * region) || hideableNs <= 0) return undefined;
  const evidence = [
    `between its first and last kernel the GPU was idle ${formatNs(idleNs)} of ${formatNs(region)} (${pct(idleNs, region)}); ${formatNs(waitingNs)} of those gaps were filled only by copies or memsets`,
  ];
  if (hideableNs < waitingNs)
    evidence.push(
      `the kernels ran ${formatNs(kernelNs)} in all: at most that much of the memory work can run under them, so the saving is ${formatNs(hideableNs)}, not the ${formatNs(waitingNs)} of waiting`,
    );
  return {
    severity: severityOf(hideableNs, ctx.spanNs),
    title: 'The GPU sits idle while memory work runs',
    count: m.kernels.length,
    bytes: null,
    timeNs: idleNs,
    estimatedSavingNs: hideableNs,
    savingHow:
      'gaps between kernels during which only copies or memsets ran, at most the kernel time not already running beside them (what overlapping the memory work with compute could hide; an upper bound)',
    evidence,
    basis,
    change:
      'Take the memory work off the critical path: prefetch inputs on a side stream, drop per-step synchronisation, and keep allocations in a pool; the other findings say which of these applies.',
  };
};
