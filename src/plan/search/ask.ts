/**
 * A plan as a person asks for it, from the inputs: --fit's largest value first where asked, then the plan, then the
 * cheapest changes that make it fit where it does not. The CLI and the page both plan through this.
 */
import { InvalidArgumentError } from '../../errors.js';
import { checkpointInputs, planOptionsFrom } from '../inputs.js';
import type { ModelConfig } from '../model-config.js';
import { type Machine, type PlanResult, plan } from '../plan.js';
import type { PlanInputs } from '../schema.js';
import { evaluator } from './evaluate.js';
import { fitLargest } from './fit.js';
import { suggest } from './suggest.js';

type Fit = { fits: boolean; bytesPerGpu: number } | undefined;

/** The full planner's answer for inputs (the allocator replayed): whether it fits, and its bytes; undefined: refused. */
function fullPlanner(m: ModelConfig, mc: Machine): (i: PlanInputs) => Fit {
  return (i) => {
    try {
      const p = plan(m, planOptionsFrom(i), mc);
      const s = p.serving;
      return { fits: p.fits, bytesPerGpu: s ? mc.capacityBytes - s.kvCacheBytes + s.maxModelLen * s.kvBytesPerToken : p.perGpu.totalBytes };
    } catch (err) {
      if (err instanceof InvalidArgumentError) return undefined;
      throw err;
    }
  };
}

/**
 * Plans `inputs` on `mc`; `prefix` is the command's words before the schema's flags, for the suggestions' commands.
 * @throws InvalidArgumentError for inputs refused, and for --fit where nothing fits at the smallest value
 */
export function planAsked(m: ModelConfig, inputs: PlanInputs, mc: Machine, prefix: readonly string[] = ['gpumem', 'plan']): PlanResult {
  const confirm = fullPlanner(m, mc);
  const evaluate = evaluator(m, mc);
  let i = checkpointInputs(m, inputs);
  let fit: PlanResult['fit'];
  if (inputs.fit) {
    const fast = fitLargest(m, i, inputs.fit, evaluate);
    // the fast path's value, or where the full planner finds it does not fit, the largest below it that does
    const f = fast && (confirm(fast.inputs)?.fits ? fast : fitLargest(m, i, inputs.fit, (x) => confirm(x), fast.value));
    if (!f) throw new InvalidArgumentError(`--fit ${inputs.fit}: the plan does not fit at the smallest value either; see the suggestions without --fit`);
    i = f.inputs;
    fit = { target: inputs.fit, input: f.input, value: f.value };
  }
  const r = plan(m, planOptionsFrom(i), mc);
  if (fit) r.fit = fit;
  if (r.fits) return r;
  const base = evaluate(i);
  if (base) r.suggestions = suggest({ model: m, machine: mc, inputs: i, baseEstimate: base.estimate, evaluate, prefix, confirm });
  return r;
}
