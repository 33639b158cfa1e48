#!/usr/bin/env node
/**
 * How long `gpumem plan`'s search for the cheapest changes takes (not a test: it times). A 70B model, full
 * fine-tuning on one H200 (it does not fit), every training change a candidate, up to three at once: the median of
 * repeats of the search on the fast path, then of the whole plan with each kept candidate confirmed by the full
 * planner. Run after `npx tsc -p .`: node benchmarks/plan-search.mjs [model] [gpu] [repeats]
 */
import { catalogueModel } from '../dist/plan/catalogue.js';
import { DEFAULT_INPUTS } from '../dist/plan/inputs.js';
import { machineFromCatalogue } from '../dist/plan/plan.js';
import { planAsked } from '../dist/plan/search/ask.js';
import { candidates } from '../dist/plan/search/candidates.js';
import { evaluator } from '../dist/plan/search/evaluate.js';
import { suggest, stepOf } from '../dist/plan/search/suggest.js';
import { TRAINING_CHANGES } from '../dist/plan/search/training-changes.js';

const [name = 'llama-3.1-70b', gpu = 'h200', n = '7'] = process.argv.slice(2);
const m = catalogueModel(name);
const mc = machineFromCatalogue(gpu);
const inputs = { ...DEFAULT_INPUTS };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = (f) => {
  const t = performance.now();
  const r = f();
  return [performance.now() - t, r];
};

const search = [];
let shown;
let evaluations = 0;
for (let k = 0; k < Number(n); k++) {
  const ev = evaluator(m, mc);
  const counted = Object.assign(
    (i) => {
      evaluations++;
      return ev(i);
    },
    {
      screen: (i) => {
        evaluations++;
        return ev.screen(i);
      },
    },
  );
  const [ms, r] = time(() => {
    const base = counted(inputs);
    return suggest({
      model: m,
      machine: mc,
      inputs,
      baseEstimate: base.estimate,
      evaluate: counted,
      prefix: ['gpumem', 'plan', '--model', name, '--gpu', gpu],
    });
  });
  search.push(ms);
  shown = r;
}
const all = candidates(
  TRAINING_CHANGES,
  {
    model: m,
    machine: mc,
    base: inputs,
    baseEstimate: evaluator(m, mc)(inputs).estimate,
    stepSeconds: stepOf({ model: m, machine: mc, evaluate: evaluator(m, mc), inputs }),
  },
  3,
).length;
const whole = [];
for (let k = 0; k < Math.min(3, Number(n)); k++) whole.push(time(() => planAsked(m, inputs, mc))[0]);
console.log(`${m.name} on one ${mc.name}, ${TRAINING_CHANGES.length} changes, ${all} candidates of up to 3`);
console.log(`search (fast path): median ${median(search).toFixed(0)} ms of ${n}, ${Math.round(evaluations / Number(n))} plans each`);
console.log(`whole plan with the kept candidates confirmed by the full planner: median ${median(whole).toFixed(0)} ms of ${whole.length}`);
for (const s of shown) console.log(`  ${s.cost.toFixed(3)}  ${(s.bytesPerGpu / 2 ** 30).toFixed(2)} GiB  ${s.flags.join(' ')}`);
