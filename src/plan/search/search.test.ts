/**
 * The search for the cheapest changes that make a plan fit: the cases, and properties over random models
 * (catalogue rows and published config.json files), GPUs and settings (fast-check, seeded).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import fc from 'fast-check';
import { catalogueModel } from '../catalogue.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from '../inputs.js';
import { type ModelConfig, parseConfigText } from '../model-config.js';
import type { TrainOptions } from '../options.js';
import { type Machine, machineFromCatalogue, machineFromMemory, plan } from '../plan.js';
import { renderPlanText } from '../../render/plan-render.js';
import { planAsked } from './ask.js';
import { candidates } from './candidates.js';
import { price } from './cost.js';
import { evaluator } from './evaluate.js';
import { fitLargest } from './fit.js';
import { byPrice } from './pareto.js';
import { searchFits } from './search.js';
import { stepOf } from './suggest.js';
import { recomputeShare, TRAINING_CHANGES } from './training-changes.js';

/** Qwen2.5-7B-Instruct's shape as its published config.json gives it (huggingface.co/Qwen/Qwen2.5-7B-Instruct). */
const QWEN = parseConfigText(
  JSON.stringify({
    architectures: ['Qwen2ForCausalLM'],
    model_type: 'qwen2',
    hidden_size: 3584,
    intermediate_size: 18944,
    num_hidden_layers: 28,
    num_attention_heads: 28,
    num_key_value_heads: 4,
    vocab_size: 152064,
    max_position_embeddings: 32768,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000.0,
    tie_word_embeddings: false,
    torch_dtype: 'bfloat16',
    hidden_act: 'silu',
  }),
  'config.json',
  'Qwen2.5-7B-Instruct',
);

const fitsReplanned = (m: ModelConfig, i: PlanInputs, mc: Machine): boolean => plan(m, planOptionsFrom(i), mc).fits;

test('Qwen2.5-7B-Instruct, full fine-tuning: the fused optimizer, then adamw8bit on an H200; adamw8bit with full recomputation on an H100, in that cost order', () => {
  const h200 = planAsked(QWEN, { ...DEFAULT_INPUTS }, machineFromCatalogue('h200'));
  assert.equal(h200.fits, false);
  const flags = h200.suggestions.map((s) => s.flags.join(' '));
  const fused = flags.indexOf('--fused-optimizer');
  const eight = flags.indexOf('--optimizer adamw8bit');
  assert.ok(fused === 0 && eight > fused, flags.join(' | '));
  const h100 = planAsked(QWEN, { ...DEFAULT_INPUTS }, machineFromCatalogue('h100'));
  const combo = h100.suggestions.find((s) => s.flags.join(' ') === '--optimizer adamw8bit --recompute full');
  assert.ok(combo, h100.suggestions.map((s) => s.flags.join(' ')).join(' | '));
  assert.ok(h200.suggestions[fused]!.cost < h200.suggestions[eight]!.cost && h200.suggestions[eight]!.cost < combo.cost);
  // each is the command that runs it, and re-planned it fits with the headroom shown
  for (const r of [h200, h100])
    for (const s of r.suggestions) {
      const i = { ...DEFAULT_INPUTS, ...s.set, given: Object.keys(s.set) } as PlanInputs;
      const p = plan(QWEN, planOptionsFrom(i), r.machine);
      assert.ok(p.fits, s.command);
      assert.equal(p.capacityBytes - p.perGpu.totalBytes, s.headroomBytes, s.command);
      assert.ok(s.command.endsWith(s.flags.join(' ')), s.command);
    }
  // the text shows each at 80 columns, the command kept whole with a shell's line continuation
  const text = renderPlanText(h100, { width: 80 });
  assert.deepEqual(
    text.split('\n').filter((l) => l.length > 80),
    [],
  );
  assert.ok(text.replace(/ \\\n +/g, ' ').includes(`$ ${combo.command}`), text);
  // shown cheapest first, each needing fewer bytes than the cheaper ones (the Pareto set)
  for (const r of [h200, h100])
    for (let k = 1; k < r.suggestions.length; k++) {
      assert.ok(r.suggestions[k]!.cost >= r.suggestions[k - 1]!.cost);
      assert.ok(r.suggestions[k]!.bytesPerGpu < r.suggestions[k - 1]!.bytesPerGpu);
    }
});

/** Published config.json files (fixtures/plan/configs) and catalogue rows, small enough to plan many times. */
const CONFIGS = ['qwen2-0.5b', 'llama-3.2-1b', 'gemma-3-1b', 'pythia-1b', 'qwen3-0.6b'].map((n) =>
  parseConfigText(readFileSync(new URL(`../../../fixtures/plan/configs/${n}/config.json`, import.meta.url), 'utf8'), 'config.json', n),
);
const MODELS = [...CONFIGS, catalogueModel('llama-3.2-3b'), catalogueModel('phi-2'), catalogueModel('qwen2.5-7b')];

const settings = fc.record({
  model: fc.constantFrom(...MODELS),
  gpu: fc.constantFrom('8GiB', '12GiB', '16GiB', '24GiB', '40GiB'),
  batch: fc.constantFrom(1, 2, 4),
  seq: fc.constantFrom(512, 1024, 2048, 4096),
  precision: fc.constantFrom('amp-bf16', 'bf16', 'fp32'),
  gpus: fc.constantFrom(1, 2),
});
type Setting = typeof settings extends fc.Arbitrary<infer T> ? T : never;
const inputsOf = (s: Setting): PlanInputs => ({ ...DEFAULT_INPUTS, batch: s.batch, seq: s.seq, precision: s.precision, gpus: s.gpus }) as PlanInputs;

/** The search on the fast path for a setting, over `rows`, the whole Pareto set. */
function fastSearch(s: Setting, rows = TRAINING_CHANGES) {
  const mc = machineFromMemory(s.gpu);
  const i = inputsOf(s);
  const evaluate = evaluator(s.model, mc);
  const base = evaluate(i);
  if (!base) return undefined;
  const step = stepOf({ model: s.model, machine: mc, evaluate, inputs: i });
  const ctx = { model: s.model, machine: mc, base: i, baseEstimate: base.estimate, stepSeconds: step };
  return { mc, i, evaluate, base, ctx, found: searchFits({ ...ctx, rows, evaluate, limit: Infinity }) };
}

test('property: every suggestion re-planned by the full planner fits, and no cheaper single change that fits is missing', () => {
  fc.assert(
    fc.property(settings, (s) => {
      const mc = machineFromMemory(s.gpu);
      const r = planAsked(s.model, inputsOf(s), mc);
      if (r.fits) return;
      for (const g of r.suggestions) assert.ok(fitsReplanned(s.model, { ...inputsOf(s), ...g.set, given: Object.keys(g.set) } as PlanInputs, mc), g.command);
      const run = fastSearch(s);
      if (!run) return;
      const singles = run.found.filter((f) => f.ids.length === 1);
      for (const f of run.found.filter((f) => f.ids.length > 1)) {
        // a combination is shown only when none of its own changes fits alone, and after every cheaper single
        for (const id of f.ids) assert.ok(!singles.some((x) => x.ids[0] === id), `${f.changes.map((c) => c.says).join(' + ')}`);
        for (const c of candidates(TRAINING_CHANGES, run.ctx, 1).filter((c) => c.price < f.price)) {
          const e = run.evaluate(c.inputs);
          if (e?.fits)
            assert.ok(
              run.found.some((x) => x.price <= c.price && x.bytesPerGpu <= e.bytesPerGpu),
              `${c.changes[0]!.says} fits and is missing`,
            );
        }
      }
    }),
    { seed: 33, numRuns: 12 },
  );
});

test('property: the Pareto set equals a brute force over a small set of knobs', () => {
  const knobs = new Set(['optimizer-step', 'optimizer-states', 'recompute', 'loss', 'micro-batch']);
  const rows = TRAINING_CHANGES.filter((r) => knobs.has(r.knob));
  fc.assert(
    fc.property(settings, (s) => {
      const run = fastSearch(s, rows);
      if (!run || run.base.fits) return;
      // brute force: every set of up to three changes (one per knob; the search's bound), the fitting ones with no fitting proper subset, and of
      // those the ones no other dominates (cheaper or as cheap, and fewer bytes or as few; ties: the earlier)
      const all = candidates(rows, run.ctx, 3).map((c) => ({ ...c, e: run.evaluate(c.inputs) }));
      const fitting = all.filter((c) => c.e?.fits);
      const minimal = fitting.filter((c) => !fitting.some((d) => d !== c && d.ids.length < c.ids.length && d.ids.every((id) => c.ids.includes(id))));
      const points = minimal.map((c) => ({ ...c, bytesPerGpu: c.e!.bytesPerGpu, size: c.ids.length })).sort(byPrice);
      const front = points.filter((p, k) => !points.some((q, j) => j < k && q.price <= p.price && q.bytesPerGpu <= p.bytesPerGpu));
      assert.deepEqual(
        run.found.map((f) => f.ids.join(',')),
        front.map((f) => f.ids.join(',')),
      );
    }),
    { seed: 7, numRuns: 15 },
  );
});

test('property: costs are monotone: more recomputation never costs less compute, and a part that grows never lowers the price', () => {
  fc.assert(
    fc.property(settings, (s) => {
      const o = planOptionsFrom(inputsOf(s)) as TrainOptions;
      const c = { model: s.model, options: o };
      const [sel, op, full] = (['selective', 'op', 'full'] as const).map((l) => recomputeShare(c, l));
      assert.ok(sel! >= 0 && sel! <= full! && op! <= full! && full! < 1);
      const longer = { model: s.model, options: { ...o, seq: o.seq * 2 } };
      assert.ok(recomputeShare(longer, 'selective') >= sel!, 'longer sequences recompute more attention');
      const base = { compute: 0.1, transferSeconds: 0.2, commSeconds: 0.1, gpus: 2, result: 0.05, words: [] };
      for (const k of ['compute', 'transferSeconds', 'commSeconds', 'gpus', 'result'] as const)
        assert.ok(price({ ...base, [k]: base[k] + 1 }, 1) > price(base, 1), k);
    }),
    { seed: 11, numRuns: 30 },
  );
});

test('--fit: the largest batch, sequence and context that fit, the next one not; refused where it does not apply', () => {
  const mc = machineFromCatalogue('h100');
  const m = catalogueModel('llama-3.2-1b');
  const evaluate = evaluator(m, mc);
  for (const t of ['batch', 'seq'] as const) {
    const f = fitLargest(m, { ...DEFAULT_INPUTS }, t, evaluate)!;
    assert.ok(evaluate(f.inputs)?.fits);
    assert.equal(evaluate({ ...f.inputs, [t]: f.value + 1 } as PlanInputs)?.fits, false, t);
  }
  const infer = { ...DEFAULT_INPUTS, mode: 'infer', engine: 'vllm', given: ['mode', 'engine'] } as PlanInputs;
  const big = catalogueModel('llama-3.1-70b');
  const ctx = fitLargest(big, { ...infer, weights: 'fp8' }, 'context', evaluator(big, mc))!;
  assert.equal(ctx.input, 'maxModelLen');
  assert.ok(ctx.value > 1000 && ctx.value < 131072);
  const r = planAsked(big, { ...infer, weights: 'fp8', fit: 'context' }, mc);
  assert.equal(r.serving!.starts, true);
  assert.deepEqual(r.fit, { target: 'context', input: 'maxModelLen', value: ctx.value });
  // the full planner has the last word: the plan at the value fits, one more does not
  const eight = catalogueModel('llama-3.1-8b');
  const qlora = { ...DEFAULT_INPUTS, lora: 16, baseWeights: 'nf4', given: ['lora', 'baseWeights'] } as PlanInputs;
  const rtx = machineFromCatalogue('rtx-4090');
  const seq = planAsked(eight, { ...qlora, fit: 'seq' }, rtx);
  assert.equal(seq.fits, true);
  assert.equal(seq.fit!.input, 'seq');
  assert.equal(plan(eight, planOptionsFrom({ ...qlora, seq: seq.fit!.value + 1 }), rtx).fits, false);
  assert.throws(() => planAsked(m, { ...DEFAULT_INPUTS, fit: 'context' }, mc), /--fit context is for --mode infer/);
  assert.throws(() => planAsked(m, { ...infer, fit: 'seq' }, mc), /--fit seq is for training/);
});
