/** The candidates of a search: each set of changes (one per knob, at most `depth`) applied to the inputs as asked. */
import type { PlanInputs } from '../schema.js';
import type { Change, ChangeContext } from './change.js';
import { addCost, type Cost, FREE, price } from './cost.js';
import { optionsOrUndefined } from './evaluate.js';

export interface Candidate {
  /** Indices into the rows, ascending: the candidate's identity. */
  ids: number[];
  changes: Change[];
  /** The inputs as asked with every change set, the keys changed counted as given. */
  inputs: PlanInputs;
  cost: Cost;
  price: number;
}

/** The inputs with a set of changes applied, or undefined where two changes set the same input differently. */
function applied(base: PlanInputs, changes: readonly Change[], e: ChangeContext['baseEstimate']): PlanInputs | undefined {
  const set: Record<string, unknown> = {};
  for (const c of changes)
    for (const [k, v] of Object.entries(c.set(base, e))) {
      if (k in set && set[k] !== v) return undefined;
      set[k] = v;
    }
  return { ...base, ...set, given: [...new Set([...(base.given ?? []), ...Object.keys(set)])] } as PlanInputs;
}

/**
 * Every candidate of up to `depth` changes from `rows` (one per knob), that the validator accepts, priced. The rows
 * that do not apply to the inputs as asked are left out first.
 */
export function candidates(rows: readonly Change[], ctx: Omit<ChangeContext, 'options'>, depth: number): Candidate[] {
  const usable = rows.map((r, k) => [r, k] as const).filter(([r]) => r.applies(ctx.base, ctx));
  const out: Candidate[] = [];
  const walk = (from: number, ids: number[], knobs: Set<string>): void => {
    if (ids.length) {
      const changes = ids.map((k) => rows[k]!);
      const inputs = applied(ctx.base, changes, ctx.baseEstimate);
      const options = inputs && optionsOrUndefined(inputs);
      if (!inputs || !options) return;
      const cost = changes.reduce((a, c) => addCost(a, c.cost({ ...ctx, options })), FREE);
      out.push({ ids, changes, inputs, cost, price: price(cost, ctx.stepSeconds) });
    }
    if (ids.length === depth) return;
    for (let u = from; u < usable.length; u++) {
      const [r, k] = usable[u]!;
      if (knobs.has(r.knob)) continue;
      walk(u + 1, [...ids, k], new Set([...knobs, r.knob]));
    }
  };
  walk(0, [], new Set());
  return out;
}
