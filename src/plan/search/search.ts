/**
 * The search for the cheapest ways to make a plan fit: every set of up to three changes (candidates.ts), taken in
 * order of price and re-planned on the fast path (evaluate.ts); a set is kept when it fits, when no part of it fits
 * on its own (a cheaper subset would do), and when it needs fewer bytes than every cheaper set kept (pareto.ts).
 */
import type { Estimate } from '../options.js';
import type { Machine } from '../plan.js';
import type { ModelConfig } from '../model-config.js';
import type { PlanInputs } from '../schema.js';
import type { Change } from './change.js';
import { type Candidate, candidates } from './candidates.js';
import type { Evaluated, Evaluator } from './evaluate.js';
import { byPrice, paretoFront } from './pareto.js';

export interface Found extends Candidate {
  bytesPerGpu: number;
  size: number;
}

export interface SearchInput {
  model: ModelConfig;
  machine: Machine;
  base: PlanInputs;
  baseEstimate: Estimate;
  stepSeconds: number;
  rows: readonly Change[];
  evaluate: Evaluator;
  /** Changes per candidate at most (3). */
  depth?: number;
  /** Candidates returned at most (5; Infinity: the whole Pareto set). */
  limit?: number;
  /**
   * The full planner (the allocator replayed), asked about each candidate the fast path finds fitting: its answer
   * and its bytes are the candidate's. Without it the fast path decides.
   */
  confirm?: ((i: PlanInputs) => { fits: boolean; bytesPerGpu: number } | undefined) | undefined;
}

const keyOf = (ids: readonly number[]): string => ids.join(',');

/** The proper, non-empty subsets of a set of ids. */
function subsets(ids: readonly number[]): number[][] {
  const out: number[][] = [];
  for (let mask = 1; mask < (1 << ids.length) - 1; mask++) out.push(ids.filter((_, k) => mask & (1 << k)));
  return out;
}

/** The Pareto set of the fitting, minimal candidates, cheapest first, at most `limit`. */
export function searchFits(s: SearchInput): Found[] {
  const all = candidates(s.rows, s, s.depth ?? 3).sort((a, b) => a.price - b.price || a.ids.length - b.ids.length);
  const byKey = new Map(all.map((c) => [keyOf(c.ids), c]));
  type Fit = { fits: boolean; bytesPerGpu: number } | undefined;
  const fast = new Map<string, Evaluated | undefined>();
  const full = new Map<string, Fit>();
  const quick = (c: Candidate): Evaluated | undefined => {
    const k = keyOf(c.ids);
    if (!fast.has(k)) fast.set(k, (s.evaluate.screen ?? s.evaluate)(c.inputs));
    return fast.get(k);
  };
  // a lower bound first (screen); then the full planner where it is given, else the fast path's estimate
  const run = (c: Candidate): Fit => {
    const k = keyOf(c.ids);
    const q = quick(c);
    if (!q?.fits) return q;
    if (!full.has(k)) full.set(k, (s.confirm ?? s.evaluate)(c.inputs));
    return full.get(k);
  };
  // a subset the validator refused is no candidate: it fits nothing
  const subsetFits = (c: Candidate): boolean =>
    subsets(c.ids).some((ids) => {
      const sub = byKey.get(keyOf(ids));
      return sub !== undefined && run(sub)?.fits === true;
    });
  const limit = s.limit ?? 5;
  const kept: Found[] = [];
  let least = Infinity;
  // in groups of one price: within a group the fewer bytes come first, as the Pareto walk takes them
  for (let g = 0; g < all.length && kept.length < limit; ) {
    let h = g;
    while (h < all.length && all[h]!.price === all[g]!.price) h++;
    const group: Found[] = [];
    for (const c of all.slice(g, h)) {
      const q = quick(c);
      if (!q?.fits || q.bytesPerGpu >= least || subsetFits(c)) continue;
      const r = run(c);
      if (r?.fits && r.bytesPerGpu < least) group.push({ ...c, bytesPerGpu: r.bytesPerGpu, size: c.ids.length });
    }
    for (const f of paretoFront(group.sort(byPrice))) {
      if (kept.length >= limit || f.bytesPerGpu >= least) break;
      kept.push(f);
      least = f.bytesPerGpu;
    }
    g = h;
  }
  return kept;
}
