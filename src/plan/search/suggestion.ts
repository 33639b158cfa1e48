/** A change that makes the plan fit, as `gpumem plan` prints it, the page shows it and --json gives it. */
import type { PlanInputs } from '../schema.js';
import type { Cost } from './cost.js';

export interface Suggestion {
  /** The flags the change sets, as the command line takes them. */
  flags: string[];
  /** The whole command that plans with the change. */
  command: string;
  /** The inputs it sets (the schema's names): the page applies them to its controls. */
  set: Partial<PlanInputs>;
  /** What the GPU holds with the change (serving: what the engine needs to start). */
  bytesPerGpu: number;
  /** Capacity less bytesPerGpu. */
  headroomBytes: number;
  /** The price it is ranked by: the extra share of a step's GPU time, plus a penalty for a changed result. */
  cost: number;
  /** The cost's parts. */
  costParts: Cost;
  /** What changes and what it costs, in words with sources. */
  reason: string;
}
