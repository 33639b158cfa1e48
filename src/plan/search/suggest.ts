/** The suggestions of a plan that does not fit: the search's Pareto set as commands, cheapest first. */
import type { ModelConfig } from '../model-config.js';
import type { Estimate, TrainOptions } from '../options.js';
import type { Machine } from '../plan.js';
import type { PlanInputs } from '../schema.js';
import type { Change } from './change.js';
import { commandOf, flagWords } from './command.js';
import { costWords } from './cost.js';
import type { Evaluator } from './evaluate.js';
import { type Found, searchFits } from './search.js';
import { SERVING_CHANGES } from './serving-changes.js';
import { stepSeconds } from './step-time.js';
import type { Suggestion } from './suggestion.js';
import { TRAINING_CHANGES } from './training-changes.js';

/** The rows that apply to a run's mode. */
export const rowsFor = (i: PlanInputs): readonly Change[] => (i.mode === 'train' ? TRAINING_CHANGES : SERVING_CHANGES);

export interface SuggestInput {
  model: ModelConfig;
  machine: Machine;
  inputs: PlanInputs;
  baseEstimate: Estimate;
  evaluate: Evaluator;
  /** The command's words before the schema's flags (gpumem plan --model ... --gpu ...). */
  prefix: readonly string[];
  rows?: readonly Change[];
  limit?: number;
  /**
   * The full planner (the allocator replayed) for the candidates the search keeps: each shown suggestion fits as
   * `gpumem plan` plans it, with its bytes. Without it the fast path's figures are shown.
   */
  confirm?: (i: PlanInputs) => { fits: boolean; bytesPerGpu: number } | undefined;
}

/** The step time the costs are shares of (1 s for inference, whose costs are shares already). */
export const stepOf = (s: Pick<SuggestInput, 'model' | 'machine' | 'evaluate' | 'inputs'>): number => {
  const o = s.evaluate(s.inputs)?.options;
  return o?.mode === 'train' ? stepSeconds(s.model, o as TrainOptions, s.machine) : 1;
};

/** A found candidate as a suggestion. */
export function suggestionOf(f: Found, s: SuggestInput, step: number): Suggestion {
  const v = f.inputs as unknown as Record<string, unknown>;
  const keys = [...new Set(f.changes.flatMap((c) => Object.keys(c.set(s.inputs, s.baseEstimate))))];
  return {
    flags: keys.flatMap((k) => flagWords(k, v[k])),
    command: commandOf(s.prefix, f.inputs),
    set: Object.fromEntries(keys.map((k) => [k, v[k]])) as Partial<PlanInputs>,
    bytesPerGpu: f.bytesPerGpu,
    headroomBytes: s.machine.capacityBytes - f.bytesPerGpu,
    cost: Math.round(f.price * 1e4) / 1e4,
    costParts: f.cost,
    reason: `${f.changes.map((c) => c.says).join(' + ')}; cost: ${costWords(f.cost, step)}`,
  };
}

/** The cheapest changes that make the plan fit (at most `limit`, 5 by default), in the order shown. */
export function suggest(s: SuggestInput): Suggestion[] {
  const step = stepOf(s);
  const found = searchFits({ ...s, base: s.inputs, stepSeconds: step, rows: s.rows ?? rowsFor(s.inputs), limit: s.limit ?? 5 });
  return found.map((f) => suggestionOf(f, s, step));
}
