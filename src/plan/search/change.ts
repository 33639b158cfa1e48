/** One change a person can make to a plan: a row of the search (training-changes.ts, serving-changes.ts). */
import type { ModelConfig } from '../model-config.js';
import type { Estimate, PlanOptions } from '../options.js';
import type { Machine } from '../plan.js';
import type { PlanInputs } from '../schema.js';
import type { Cost } from './cost.js';

/** What a row's predicate and cost see: the model, the machine, the plan as asked and the candidate's options. */
export interface ChangeContext {
  model: ModelConfig;
  machine: Machine;
  /** The inputs as asked, and their estimate. */
  base: PlanInputs;
  baseEstimate: Estimate;
  /** The candidate's options (every change of its set applied): a cost that scales with sharding sees it. */
  options: PlanOptions;
  /** Seconds of compute per training step (0 for inference). */
  stepSeconds: number;
}

export interface Change {
  /**
   * The knob it turns: a candidate holds one change per knob at most (recompute selective or full, never both).
   * Knobs are listed cheapest first as a rule; the order only decides how combinations are written.
   */
  knob: string;
  /** What it does, in words. */
  says: string;
  /** The inputs it sets (schema names), from the inputs as asked and their estimate. */
  set: (i: PlanInputs, e: Estimate) => Partial<PlanInputs>;
  /** Whether it is a change at all for the inputs as asked (the schema's validator refuses what contradicts). */
  applies: (i: PlanInputs, ctx: Pick<ChangeContext, 'model' | 'machine'>) => boolean;
  /** Its cost in the candidate's context, each part with its source. */
  cost: (ctx: ChangeContext) => Cost;
}
