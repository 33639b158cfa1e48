/** Each family's block as activations.ts counts it from the model's traits, the MoE extras, and Gemma 2's softcapping. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { savedBytesPerToken, type SavedContext } from './activations.js';
import { catalogueModel } from './catalogue.js';
import { readConfigFile } from './config-file.js';
import { estimate, type Precision, type TrainOptions } from './estimate.js';
import { activationBytes, finalSoftcapBytesPerToken, softcapScoreBytes } from './family-activations.js';
import { normaliseConfig, type ModelConfig } from './model-config.js';
import { moeLayerExtraBytesPerToken } from './moe-activations.js';
import { inferOptions, trainOptions } from '../testing/plan-options.js';

const CONFIGS = fileURLToPath(new URL('../../fixtures/plan/configs/', import.meta.url));
const PRECISIONS: Precision[] = ['fp32', 'amp-bf16', 'bf16', 'bf16-pure'];
const saved = (m: ModelConfig, precision: Precision, moeLayer = false): number => savedBytesPerToken(m, { precision } as SavedContext, moeLayer);

test('the blocks the activation count was measured on (GPT-2, Llama, Qwen2, Mistral) have no family extras and no softcapping', () => {
  const measured = [
    catalogueModel('gpt-2'),
    catalogueModel('gpt-2-medium'),
    catalogueModel('llama-3-8b'),
    catalogueModel('llama-2-7b'),
    catalogueModel('mistral-7b'),
    catalogueModel('qwen2.5-7b'),
  ];
  for (const m of measured) {
    assert.equal(m.arch.parallelResidual, false, m.name);
    assert.equal(m.arch.qkNorm, 'none', m.name);
    assert.equal(m.arch.normsPerLayer, 2, m.name);
    assert.equal(m.moe, undefined, m.name);
    for (const p of PRECISIONS) assert.equal(softcapScoreBytes(m, p) + finalSoftcapBytesPerToken(m, p), 0, `${m.name} ${p}`);
  }
});

test('MoE layers keep, per (token, expert) pair, the gathered input and the expert output, and the router its fp32 probabilities', () => {
  const mix = catalogueModel('mixtral-8x7b');
  for (const p of PRECISIONS) {
    const e = activationBytes(p);
    const extra = moeLayerExtraBytesPerToken(mix, p);
    // at least two hidden states per pair (the gathered input, the output the routing weight multiplies)
    assert.ok(extra >= 2 * (mix.moe?.expertsPerToken ?? 0) * mix.hidden * e, `${p}: ${extra}`);
    assert.ok(extra >= (mix.moe?.experts ?? 0) * 4, 'the router softmax in fp32');
    // frozen experts (adapters elsewhere) keep no gathered input for their weights' gradient
    assert.ok(moeLayerExtraBytesPerToken(mix, p, false) < extra, p);
    // and it grows with every expert a token visits, by at least those two hidden states
    const top4 = { ...mix, moe: { ...(mix.moe as NonNullable<ModelConfig['moe']>), expertsPerToken: 4 } };
    assert.ok(moeLayerExtraBytesPerToken(top4, p) - extra >= 2 * 2 * mix.hidden * e, p);
    // the MoE layer's count carries it, the dense layer's does not
    assert.equal(saved(mix, p, true) - saved({ ...mix, moe: undefined } as ModelConfig, p, true) > 0, true, p);
  }
  // Qwen2-MoE's shared expert gate keeps the shared expert's output: more than without the gate
  const q = catalogueModel('qwen1.5-moe-a2.7b');
  const qm = q.moe as NonNullable<ModelConfig['moe']>;
  assert.ok(moeLayerExtraBytesPerToken(q, 'bf16') - moeLayerExtraBytesPerToken({ ...q, moe: { ...qm, sharedExpertGate: false } }, 'bf16') >= q.hidden * 2);
});

test('family differences: a fused GELU keeps two MLP tensors not five, parallel blocks share their norm, rotary copies, extra and q/k norms keep more', () => {
  const gpt = { model_type: 'gpt2', n_embd: 1024, n_layer: 4, n_head: 16, vocab_size: 1000, n_positions: 1024 };
  const pythonGelu = normaliseConfig(gpt, 'gelu_new');
  const fusedGelu = normaliseConfig({ ...gpt, activation_function: 'gelu' }, 'gelu');
  for (const p of PRECISIONS) {
    const f = pythonGelu.intermediate;
    const gelu = p === 'amp-bf16' ? 4 : activationBytes(p);
    // three of the Python GELU's f-wide tensors go (fp32 under autocast); the next matmul keeps a 16-bit input either way
    assert.equal(saved(pythonGelu, p) - saved(fusedGelu, p), 3 * gelu * f, p);
  }
  // Phi and Falcon-7B: one norm feeds attention and MLP; a serial block keeps more
  const falcon = catalogueModel('falcon-7b');
  const falconSerial = normaliseConfig({ ...readJson('falcon-7b'), parallel_attn: false }, 'serial');
  assert.ok(saved(falcon, 'amp-bf16') < saved(falconSerial, 'amp-bf16'));
  // GPT-NeoX keeps rotated copies of q and k beside its fused q,k,v output
  const neox = catalogueModel('pythia-1.4b');
  const neoxNoRotary = { ...neox, arch: { ...neox.arch, rotaryFraction: 0 } };
  assert.equal(saved(neox, 'bf16') - saved(neoxNoRotary, 'bf16'), 2 * neox.hidden * 2, 'q and k rotated copies');
  // Gemma 2: two more norms per layer, each its fp32 input and its 16-bit output (the weight trains)
  const g2 = catalogueModel('gemma-2-9b');
  assert.equal(saved(g2, 'bf16-pure') - saved({ ...g2, arch: { ...g2.arch, normsPerLayer: 2 } }, 'bf16-pure'), 2 * (4 + 2) * g2.hidden);
  // Qwen3's q and k norms keep their inputs (fp32) and outputs: (q + k widths) x 6 bytes in bf16
  const q3 = catalogueModel('qwen3-8b');
  assert.equal(saved(q3, 'bf16-pure') - saved({ ...q3, arch: { ...q3.arch, qkNorm: 'none' } }, 'bf16-pure'), (q3.heads + q3.kvHeads) * q3.headDim * (4 + 2));
});

test("Gemma 2's softcapping: eager attention keeps tanh's output per score, the loss a softcapped logit tensor; Gemma 3 has neither", () => {
  const g2 = catalogueModel('gemma-2-9b');
  const noCap = { ...g2, arch: { ...g2.arch, attnSoftcap: undefined, finalSoftcap: undefined } };
  const lines = (m: typeof g2, o: TrainOptions) => {
    const e = estimate(m, o);
    return [...e.lines, ...(e.otherMoment?.lines ?? [])];
  };
  const eager = trainOptions({ attention: 'eager', seq: 1024 });
  const matrices = (m: typeof g2) => lines(m, eager).find((l) => /attention matrices/.test(l.name))?.bytes ?? 0;
  assert.ok(matrices(noCap) > 0);
  assert.equal(matrices(g2) / matrices(noCap), (2 + 2) / 2, 'the softmax (2 bytes as counted) and tanh (2 bytes) per score');
  // SDPA, transformers' default, runs a fused kernel and drops the cap: no matrices
  assert.equal(lines(g2, trainOptions({ seq: 1024 })).filter((l) => /attention matrices/.test(l.name)).length, 0);
  const capLine = lines(g2, trainOptions({ seq: 1024 })).find((l) => /softcapped logits/.test(l.name));
  assert.equal(capLine?.bytes, g2.vocab * 2 * 1024);
  assert.equal(lines(catalogueModel('gemma-3-1b'), trainOptions({ seq: 1024 })).filter((l) => /softcapped/.test(l.name)).length, 0);
});

test('every checkpoint family plans training and inference with positive, finite figures', () => {
  const sources = JSON.parse(readFileSync(join(CONFIGS, 'sources.json'), 'utf8')) as Record<string, unknown>;
  for (const name of Object.keys(sources)
    .filter((k) => !k.startsWith('_'))
    .map((k) => ({ name: k }))) {
    const m = readConfigFile(join(CONFIGS, name.name));
    for (const precision of PRECISIONS) {
      const e = estimate(m, trainOptions({ precision, seq: 512 }));
      assert.ok(Number.isFinite(e.totalBytes) && e.activationsBytes > 0, `${name.name} ${precision}`);
    }
    const i = estimate(m, inferOptions({ batch: 4, prompt: 8192 }));
    assert.ok(Number.isFinite(i.totalBytes) && i.kvCacheBytes > 0, `${name.name} inference`);
  }
});

function readJson(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(CONFIGS, name, 'config.json'), 'utf8')) as Record<string, unknown>;
}
