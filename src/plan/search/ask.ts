/**
 * A plan as a person asks for it, from the inputs: --fit's largest value first where asked, then the plan, then the
 * cheapest changes that make it fit where it does not. The CLI and the page both plan through this.
 */
import { InvalidArgumentError } from '../../errors.js';
import { planOptionsFrom } from '../inputs.js';
import type { ModelConfig } from '../model-config.js';
import { type Machine, type PlanResult, plan } from '../plan.js';
import type { PlanInputs } from '../schema.js';
import { evaluator } from './evaluate.js';
import { fitLargest } from './fit.js';
import { suggest } from './suggest.js';

/**
 * Plans `inputs` on `mc`; `prefix` is the command's words before the schema's flags, for the suggestions' commands.
 * @throws InvalidArgumentError for inputs refused, and for --fit where nothing fits at the smallest value
 */
export function planAsked(m: ModelConfig, inputs: PlanInputs, mc: Machine, prefix: readonly string[] = ['gpumem', 'plan']): PlanResult {
  let i = inputs;
  let fit: PlanResult['fit'];
  if (inputs.fit) {
    const f = fitLargest(m, i, inputs.fit, evaluator(m, mc));
    if (!f) throw new InvalidArgumentError(`--fit ${inputs.fit}: the plan does not fit at the smallest value either; see the suggestions without --fit`);
    i = f.inputs;
    fit = { target: inputs.fit, input: f.input, value: f.value };
  }
  const r = plan(m, planOptionsFrom(i), mc);
  if (fit) r.fit = fit;
  if (r.fits) return r;
  const evaluate = evaluator(m, mc);
  const base = evaluate(i);
  const confirm = (c: PlanInputs): { fits: boolean; bytesPerGpu: number } | undefined => {
    try {
      const p = plan(m, planOptionsFrom(c), mc);
      return {
        fits: p.fits,
        bytesPerGpu: p.serving ? mc.capacityBytes - p.serving.kvCacheBytes + p.serving.maxModelLen * p.serving.kvBytesPerToken : p.perGpu.totalBytes,
      };
    } catch (err) {
      if (err instanceof InvalidArgumentError) return undefined;
      throw err;
    }
  };
  if (base) r.suggestions = suggest({ model: m, machine: mc, inputs: i, baseEstimate: base.estimate, evaluate, prefix, confirm });
  return r;
}
