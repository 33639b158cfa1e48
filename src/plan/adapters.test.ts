/**
 * Adapters and the memory savers of training: trainable parameter counts against the figures PEFT's
 * print_trainable_parameters() printed for real models, and each saver's effect as the frameworks allocate.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { adapterParams } from './adapters.js';
import { catalogueModel } from './catalogue.js';
import { estimate, type BaseWeights, type Parallelism, type TrainOptions } from './estimate.js';
import { normaliseConfig, type ModelConfig } from './model-config.js';
import { countParams } from './params.js';
import { allocatorPeaks, machineFromCatalogue, plan } from './plan.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';

/** Configs written from the published config.json of each checkpoint (hidden size, layers, heads, vocabulary). */
const LLAMA_32_1B = {
  model_type: 'llama',
  hidden_size: 2048,
  intermediate_size: 8192,
  num_hidden_layers: 16,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  head_dim: 64,
  vocab_size: 128256,
  tie_word_embeddings: true,
};
const LLAMA_32_3B = {
  model_type: 'llama',
  hidden_size: 3072,
  intermediate_size: 8192,
  num_hidden_layers: 28,
  num_attention_heads: 24,
  num_key_value_heads: 8,
  head_dim: 128,
  vocab_size: 128256,
  tie_word_embeddings: true,
};
const QWEN25_3B = {
  model_type: 'qwen2',
  hidden_size: 2048,
  intermediate_size: 11008,
  num_hidden_layers: 36,
  num_attention_heads: 16,
  num_key_value_heads: 2,
  vocab_size: 151936,
  tie_word_embeddings: true,
};

const cfg = (c: object, name: string): ModelConfig => normaliseConfig(c, 'test', name);
const lora = (rank: number, targets: TrainOptions['lora'] extends infer L ? (L extends { targets: infer T } ? T : never) : never, dora = false) => ({
  rank,
  targets,
  dtype: undefined,
  dropout: false,
  dora,
  base: 'bf16' as BaseWeights,
  doubleQuant: false,
});

test("trainable parameters are what PEFT's print_trainable_parameters printed for the published models", () => {
  // "trainable params: N || all params: M": PEFT's docs and README, and its MetaMathQA method comparison results
  // (huggingface/peft, README.md and docs/source/quicktour.md at 5d602fd; method_comparison/MetaMathQA/results at b8bf407)
  const cases: Array<[string, ModelConfig, ReturnType<typeof lora>, number, number]> = [
    ['Llama-2-7B r=8 q_proj,v_proj', catalogueModel('llama-2-7b'), lora(8, ['q_proj', 'v_proj']), 4_194_304, 6_742_609_920],
    ['Qwen2.5-3B r=16, PEFT default targets', cfg(QWEN25_3B, 'qwen2.5-3b'), lora(16, 'default'), 3_686_400, 3_089_625_088],
    ['Llama-3.2-1B r=8 q_proj', cfg(LLAMA_32_1B, 'llama-3.2-1b'), lora(8, ['q_proj']), 524_288, 1_236_338_688],
    ['Llama-3.2-3B r=32 q_proj,v_proj', cfg(LLAMA_32_3B, 'llama-3.2-3b'), lora(32, ['v_proj', 'q_proj']), 9_175_040, 3_221_924_864],
    ['Llama-3.2-3B r=64 q_proj,v_proj', cfg(LLAMA_32_3B, 'llama-3.2-3b'), lora(64, ['q_proj', 'v_proj']), 18_350_080, 3_231_099_904],
    ['Llama-3.2-3B r=32 DoRA', cfg(LLAMA_32_3B, 'llama-3.2-3b'), lora(32, ['q_proj', 'v_proj'], true), 9_289_728, 3_222_039_552],
    ['Llama-3.2-3B r=10 MLP', cfg(LLAMA_32_3B, 'llama-3.2-3b'), lora(10, ['up_proj', 'gate_proj', 'down_proj']), 9_461_760, 3_222_211_584],
  ];
  for (const [what, m, l, trainable, all] of cases) {
    const c = countParams(m);
    const a = adapterParams(m, c, l);
    assert.equal(a, trainable, `${what}: trainable`);
    assert.equal(c.total + a, all, `${what}: all params`);
  }
});

const one: Parallelism = { gpus: 1, nodes: 1, zero: 0, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 };
const train = (over: Partial<TrainOptions> = {}): TrainOptions => ({
  mode: 'train',
  precision: 'amp-bf16',
  optimizer: 'adamw',
  fusedOptimizer: false,
  batch: 1,
  seq: 2048,
  gradAccum: 1,
  recompute: 'none',
  attention: 'sdpa',
  framework: 'pytorch',
  parallel: one,
  offload: 'none',
  fragmentation: 0.05,
  ...over,
});
const line = (o: TrainOptions, re: RegExp, m = catalogueModel('llama-3-8b')) => {
  const e = estimate(m, o);
  return [...e.lines, ...(e.otherMoment?.lines ?? [])].find((l) => re.test(l.name));
};

test('LoRA: a frozen 16-bit base, fp32 adapters with fp32 gradients and AdamW states, no autocast copy of the base', () => {
  const m = catalogueModel('llama-3-8b');
  const c = countParams(m);
  const l = lora(16, 'default');
  const e = estimate(m, train({ lora: l }));
  const A = adapterParams(m, c, l);
  assert.equal(line(train({ lora: l }), /frozen base/)!.bytes, 2 * c.total, 'bf16 base: 2 bytes per parameter');
  assert.equal(line(train({ lora: l }), /adapters/)!.bytes, 4 * A, "PEFT's autocast_adapter_dtype keeps adapters in fp32");
  assert.equal(e.modelStates.gradientsBytes, 4 * A);
  assert.equal(e.modelStates.optimizerBytes, 8 * A, 'two fp32 AdamW states per adapter parameter');
  assert.equal(e.autocastCacheBytes, 2 * A, 'autocast copies only the fp32 adapters');
  const full = estimate(m, train());
  assert.ok(e.totalBytes < full.totalBytes / 3, 'no gradients or optimizer states for the 8B base');
});

test('QLoRA: 4-bit weights with their absmax per 64-block, double quantisation, the rest in fp32, one dequantised weight', () => {
  const m = catalogueModel('llama-3-8b');
  const base = (q: Partial<ReturnType<typeof lora>>) => line(train({ lora: { ...lora(16, 'default'), ...q } }), /frozen base/)!.bytes;
  const nf4 = base({ base: 'nf4' });
  const dq = base({ base: 'nf4', doubleQuant: true });
  const c = countParams(m);
  const quantised = c.total - c.embedding - c.lmHead - c.finalNorm - m.layers * 2 * m.hidden; // every linear weight of the blocks
  const rest = c.total - quantised;
  assert.equal(nf4, quantised * (0.5 + 4 / 64) + rest * 4);
  assert.equal(dq, quantised * (0.5 + 1 / 64 + 4 / (64 * 256)) + rest * 4);
  assert.ok(dq < nf4, 'double quantisation stores the absmax in 8 bits');
  const deq = line(train({ lora: { ...lora(16, 'default'), base: 'nf4' } }), /dequantised/);
  assert.equal(deq!.bytes, 2 * m.hidden * m.intermediate, 'the largest layer (an MLP projection) in bf16');
  assert.equal(line(train({ lora: lora(16, 'default') }), /dequantised/), undefined, 'a 16-bit base needs no dequantisation');
});

test('optimizers: 8-bit states are two bytes per parameter with no foreach temporaries; paged states live outside the allocator', () => {
  const m = catalogueModel('llama-3-8b');
  const P = countParams(m).total;
  const eight = estimate(m, train({ precision: 'bf16-pure', optimizer: 'adamw8bit' }));
  assert.ok(Math.abs(eight.modelStates.optimizerBytes / P - 2) < 0.01);
  assert.equal(eight.optimizerTemporariesBytes, 0);
  const paged = plan(m, train({ precision: 'bf16-pure', optimizer: 'paged-adamw8bit' }), machineFromCatalogue('h200'));
  const states = paged.lines.find((l) => l.field === 'optimizerBytes');
  if (states) assert.equal(states.outsideAllocator, true);
  assert.ok(paged.perGpu.allocatedPeakBytes <= paged.perGpu.totalBytes - (paged.lines.find((l) => l.field === 'optimizerBytes')?.bytes ?? 0));
});

test('optimizer in backward: no step moment, one gradient at a time; refused with gradient accumulation', () => {
  const m = catalogueModel('llama-3-8b');
  const normal = estimate(m, train({ precision: 'bf16-pure', fusedOptimizer: true }));
  const inBwd = estimate(m, train({ precision: 'bf16-pure', optimizerInBackward: true }));
  assert.equal(inBwd.otherMoment, undefined);
  // one gradient (at most the largest tensor, the embedding) and its step temporary instead of every gradient
  assert.ok(inBwd.gradientsBytes <= (4 * countParams(m).largestTensor * 2) / 2 && inBwd.gradientsBytes < normal.gradientsBytes / 4);
  assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, optimizerInBackward: true, gradAccum: 4 }), /cannot accumulate/);
});

test('activation offloading keeps about two layers on the GPU and puts the rest in pinned host memory, within --host-memory', () => {
  const m = catalogueModel('llama-3-8b');
  const o = train({ precision: 'bf16-pure', batch: 8, recompute: 'full' });
  const kept = estimate(m, o).activationsBytes;
  const off = estimate(m, { ...o, activationOffload: true });
  assert.ok(off.hostBytes > 0 && off.hostActivationsBytes === off.hostBytes);
  assert.ok(off.activationsBytes < kept);
  const small = { ...machineFromCatalogue('h200'), hostMemoryBytes: off.hostBytes / 2 };
  assert.throws(() => plan(m, { ...o, activationOffload: true }, small), /--host-memory .* cannot hold it/);
  assert.doesNotThrow(() => plan(m, { ...o, activationOffload: true }, { ...small, hostMemoryBytes: off.hostBytes * 2 }));
});

test('the loss: chunked keeps the fp32 log-probabilities but only a chunk of their gradients; fused keeps no logits', () => {
  const m = catalogueModel('llama-3-8b');
  // the loss's lines are in the backward moment, whichever moment peaks
  const logits = (loss: TrainOptions['loss']) => {
    const e = estimate(m, train({ precision: 'bf16-pure', loss }));
    return [...e.lines, ...(e.otherMoment?.lines ?? [])].filter((l) => l.field === 'logitsBytes').reduce((a, l) => a + l.bytes, 0);
  };
  const T = 2048;
  assert.equal(logits('standard'), 3 * 4 * m.vocab * T, 'log-probabilities and two fp32 gradients');
  assert.equal(logits('chunked'), 4 * m.vocab * T + (2 * 4 * m.vocab * T) / 8, "torchtune's 8 chunks");
  // fused: the input's gradient and the output layer's gradient, both made in the forward pass; no logits
  assert.equal(logits('fused'), 2 * m.hidden * T + 2 * m.vocab * m.hidden);
});

test('FSDP2: gradients unsharded under accumulation, the root unit gathered for the step', () => {
  const m = catalogueModel('llama-3-8b');
  const c = countParams(m);
  const fsdp = { ...one, gpus: 8, zero: 3 as const };
  const acc = estimate(m, train({ precision: 'bf16-pure', parallel: fsdp, gradAccum: 4 }));
  const noAcc = estimate(m, train({ precision: 'bf16-pure', parallel: fsdp }));
  assert.equal(acc.modelStates.gradientsBytes, 2 * c.total, 'every gradient, unsharded');
  assert.equal(noAcc.modelStates.gradientsBytes, (2 * c.total) / 8);
  const root = line(train({ precision: 'bf16-pure', parallel: fsdp }), /root unit/);
  assert.equal(root!.bytes, (c.embedding + c.lmHead + c.finalNorm) * 2 * (7 / 8));
});

test("per-op checkpointing keeps more than full recomputation and less than none; torchao's fp8 adds the running matmul's casts", () => {
  const m = catalogueModel('llama-3-8b');
  const acts = (recompute: TrainOptions['recompute']) => estimate(m, train({ precision: 'bf16-pure', batch: 4, recompute })).activationsBytes;
  assert.ok(acts('full') < acts('op') && acts('op') < acts('none'));
  assert.ok(line(train({ precision: 'fp8-torchao' }), /torchao float8/));
});

test('JSON peaks: allocated is the tensors, reserved adds the fragmentation allowance, the total adds the context', () => {
  const r = plan(catalogueModel('llama-3-8b'), train({ lora: lora(16, 'all-linear') }), machineFromCatalogue('h200'));
  const p = allocatorPeaks(r.lines);
  assert.deepEqual({ a: r.perGpu.allocatedPeakBytes, r: r.perGpu.reservedPeakBytes }, { a: p.allocatedPeakBytes, r: p.reservedPeakBytes });
  const frag = r.lines.find((l) => l.name === 'fragmentation allowance')!.bytes;
  assert.equal(r.perGpu.reservedPeakBytes - r.perGpu.allocatedPeakBytes, frag);
  assert.ok(r.perGpu.totalBytes > r.perGpu.reservedPeakBytes, 'the CUDA context is outside both');
});

test('bad inputs are refused with the reason by the one check the CLI and the page share', () => {
  const bad: Array<[Partial<PlanInputs>, RegExp]> = [
    [{ batch: -3 }, /--batch must be at least 1/],
    [{ batch: 0 }, /--batch must be at least 1/],
    [{ gpus: 0 }, /--gpus must be at least 1/],
    [{ batch: Number.NaN }, /--batch must be a whole number/],
    [{ lora: 0 }, /--lora must be at least 1/],
    [{ baseWeights: 'nf4' }, /4-bit base .* give --lora/],
    [{ baseWeights: 'int8' }, /8-bit base .* give --lora/],
    [{ dora: true }, /--dora needs adapters/],
    [{ lora: 8, doubleQuant: true }, /--double-quant .* nf4 or fp4/],
    [{ mode: 'infer', zero: 3, given: ['zero'] }, /--zero is for training/],
    [{ mode: 'infer', lora: 8, given: ['lora'] }, /--lora is for training/],
    [{ kvDtype: 'fp8', given: ['kvDtype'] }, /--kv-dtype is for --mode infer/],
    [{ fsdp: true, zero: 1, given: ['fsdp', 'zero'] }, /--fsdp is ZeRO stage 3: it contradicts --zero 1/],
    [{ flashAttention: true, attention: 'eager', given: ['attention', 'flashAttention'] }, /--flash-attention contradicts --attention eager/],
    [{ lora: 8, framework: 'megatron' }, /contradicts --framework megatron/],
    [{ hostMemoryBytes: 0 }, /--host-memory/],
  ];
  for (const [i, why] of bad) assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, ...i }), why, JSON.stringify(i));
  const m = catalogueModel('llama-2-7b');
  const mc = machineFromCatalogue('h200');
  assert.throws(() => plan(m, planOptionsFrom({ ...DEFAULT_INPUTS, lora: 5000 }), mc), /--lora 5000 exceeds q_proj's smaller side/);
  assert.throws(
    () => plan(m, planOptionsFrom({ ...DEFAULT_INPUTS, lora: 8, loraTargets: 'c_attn' }), mc),
    /has no such module; its linear layers are q_proj, k_proj/,
  );
  // the defaults are never a contradiction
  assert.doesNotThrow(() => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer' }));
});
