/**
 * One program, three interpreters: the folded liveness walk (what plans read), the unrolled walk, and the replay
 * through PyTorch's caching allocator must see the same tensors. On every catalogue model, every family the planner
 * reads (fixtures/plan/configs) and the options that change the program's shape, the folded walk's peak equals the
 * unrolled walk's to the byte and the replay's peak of tensor bytes in its measured step; a double free or a free of a
 * tensor the program never made fails the replay.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { catalogueModel, MODEL_CONFIGS } from '../catalogue.js';
import { readConfigFile } from '../config-file.js';
import { generateProgram } from './generate.js';
import { generateSetup } from '../infer.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from '../inputs.js';
import type { ModelConfig } from '../model-config.js';
import { checkParallel, type InferOptions, type TrainOptions } from '../options.js';
import { Replay } from './replay.js';
import { replayRun, setupOf } from '../train.js';
import { trainProgram } from './train-step.js';
import { Walk } from './walk.js';

const CONFIGS = fileURLToPath(new URL('../../../fixtures/plan/configs/', import.meta.url));

/** Every model the planner knows: the catalogue and the configs of every family in the fixtures. */
function models(): ModelConfig[] {
  const out = Object.keys(MODEL_CONFIGS).map((n) => catalogueModel(n));
  for (const d of readdirSync(CONFIGS, { withFileTypes: true }))
    if (d.isDirectory() && d.name !== 'litgpt-untied') out.push(readConfigFile(`${CONFIGS}${d.name}`));
  return out;
}

/** The options that change the program's shape, each as the CLI would take them. */
const VARIANTS: Array<Partial<PlanInputs>> = [
  {},
  { recompute: 'full' },
  { recompute: 'op' },
  { recompute: 'selective', attention: 'eager' },
  { compile: true },
  { compile: 'blocks', recompute: 'op' },
  { lora: 8, loraTargets: 'all-linear', loraDropout: 0.05 },
  { lora: 8, loraTargets: 'all-linear', baseWeights: 'nf4', recompute: 'full' },
  { lora: 8, loraTargets: 'all-linear', dora: true, precision: 'bf16-pure' },
  { optimizerInBackward: true, precision: 'bf16-pure' },
  { activationOffload: true, gradAccum: 3, loss: 'chunked' },
  { loss: 'fused', precision: 'fp32' },
  { gpus: 8, fsdp: '2', gradAccum: 2 },
  // torchtitan's FSDP2 units from 83e6941: the embedding's and the head's apart from the root
  { gpus: 8, fsdp: '2', torchtitan: '2025-08-14', gradAccum: 2 },
  { gpus: 8, fsdp: '2', torchtitan: '2025-08-14', pp: 2, lora: 8, loraTargets: 'all-linear' },
  { gpus: 8, fsdp: '1', gradAccum: 2 },
  { gpus: 8, zero: 2 },
  { gpus: 8, zero: 3 },
  { gpus: 8, tp: 2, pp: 2 },
  { framework: 'litgpt', lora: 8, loraTargets: 'all-linear', baseWeights: 'nf4', precision: 'bf16-pure', gradAccum: 2 },
  { framework: 'megatron', precision: 'bf16', gpus: 8, tp: 2, zero: 1, gradAccum: 2 },
];

/** The options for `m`, or undefined where the model cannot take them (no PEFT default, a layout it does not divide). */
function optionsFor(m: ModelConfig, v: Partial<PlanInputs>): TrainOptions | undefined {
  try {
    const o = planOptionsFrom({ ...DEFAULT_INPUTS, batch: 2, seq: 128, ...v }) as TrainOptions;
    checkParallel(m, o.parallel);
    setupOf(m, o);
    return o;
  } catch {
    return undefined;
  }
}

/** The steady-state step's peak of tensor bytes (outside the allocator not counted), as the walk sees it. */
function walkPeak(m: ModelConfig, o: TrainOptions, exact: boolean): number {
  const w = new Walk(exact);
  trainProgram(w, setupOf(m, o), { steps: 1, steadyState: true, fp32Cast: false });
  const peaks = [...w.peaks().values()];
  return Math.max(...peaks.map((p) => p.bytes - [...p.byTag].filter(([t]) => t.outsideAllocator).reduce((a, [, b]) => a + b, 0)));
}

test('training: the folded walk, the unrolled walk and the allocator replay see the same tensors on every model and family', () => {
  let checked = 0;
  const families = new Set<string>();
  for (const m of models())
    for (const v of VARIANTS) {
      const o = optionsFor(m, v);
      if (!o) continue;
      const what = `${m.name} ${JSON.stringify(v)}`;
      const folded = walkPeak(m, o, false);
      assert.equal(folded, walkPeak(m, o, true), `${what}: folding the repeats is exact`);
      const r = replayRun(m, o);
      if (r) assert.ok(Math.abs(r.peakTensorBytes - folded) <= 1e-6 * folded, `${what}: the replay's tensors ${r.peakTensorBytes}, the walk's ${folded}`);
      assert.ok(!r || r.peakAllocatedBytes >= r.peakTensorBytes, `${what}: the allocator's blocks hold the tensors`);
      assert.ok(!r || r.peakReservedBytes >= r.peakAllocatedBytes, `${what}: reserved holds what is allocated`);
      families.add(m.modelType);
      checked++;
    }
  assert.ok(checked >= 500, `${checked} runs checked`);
  assert.ok(families.size >= 20, `${families.size} families`);
});

test('Hugging Face generate: the walk of the last step agrees with the replay of every step on the cache it holds', () => {
  // each transformers release's generate: the current one, and one that holds the previous step's cache and outputs
  for (const [m, engineVersion] of models().flatMap((m) => [[m, undefined] as const, [m, '4.35'] as const])) {
    const o = planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer', batch: 2, prompt: 64, newTokens: 16, engineVersion }) as InferOptions;
    const w = new Walk();
    generateProgram(w, generateSetup(m, o), false);
    const r = new Replay();
    generateProgram(r, generateSetup(m, o), true);
    const walked = Math.max(...[...w.peaks().values()].map((p) => p.bytes));
    // the replay's steps reach the walk's last step; the walk's shortcut frees the growing copies at once
    assert.ok(Math.abs(r.figures().peakTensorBytes / walked - 1) < 0.01, `${m.name} ${engineVersion}: ${r.figures().peakTensorBytes} against ${walked}`);
  }
});
