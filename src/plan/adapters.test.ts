/**
 * Adapters and the memory savers of training: trainable parameter counts against the figures PEFT's
 * print_trainable_parameters() printed for real models, and each saver's effect as the frameworks allocate.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Keeper, modules } from './program/block-context.js';
import { linears, type MatmulExtras } from './program/linear.js';
import { Walk } from './program/walk.js';
import { setupOf } from './train.js';
import { adapterParams, linearModules } from './adapters.js';
import { catalogueModel } from './catalogue.js';
import { estimate, type BaseWeights, type TrainOptions } from './estimate.js';
import { normaliseConfig, type ModelConfig } from './model-config.js';
import { countParams } from './params.js';
import { allocatorPeaks, machineFromCatalogue, plan } from './plan.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import { inferOptions, ONE_GPU, trainOptions } from '../testing/plan-options.js';

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

/** A line of the plan at its full size (the most it holds at any moment of the step). */
const line = (o: TrainOptions, re: RegExp, m = catalogueModel('llama-3-8b')) => estimate(m, o).fullLines.find((l) => re.test(l.name));

/** The peak of one linear layer's forward pass on its own walk, with the matmul's extras. */
function matmulPeak(o: TrainOptions, extras: MatmulExtras, m = catalogueModel('llama-3-8b')): { peak: number; weight: number; input: number; inputs: number } {
  const s = setupOf(m, o);
  const w = new Walk();
  const k = new Keeper(w, s.x, 'eager', -1);
  const l = modules(s.x, false).find((x) => x.path === 'mlp.down_proj')!;
  const input = w.alloc(2 * l.in * s.x.tokens, s.x.tags.transient);
  w.phase('forward');
  linears(k, input, 2, [l], 'mlp-act', extras);
  return { peak: w.peaks().get('forward')!.bytes, weight: l.weight, input: 2 * l.in * s.x.tokens, inputs: l.in * s.x.tokens };
}

test('LoRA: a frozen 16-bit base, fp32 adapters with fp32 gradients and AdamW states, no autocast copy of the base', () => {
  const m = catalogueModel('llama-3-8b');
  const c = countParams(m);
  const l = lora(16, 'default');
  const e = estimate(m, trainOptions({ lora: l }));
  const A = adapterParams(m, c, l);
  assert.equal(line(trainOptions({ lora: l }), /frozen base/)!.bytes, 2 * c.total, 'bf16 base: 2 bytes per parameter');
  assert.equal(line(trainOptions({ lora: l }), /adapters/)!.bytes, 4 * A, "PEFT's autocast_adapter_dtype keeps adapters in fp32");
  assert.equal(e.modelStates.gradientsBytes, 4 * A);
  assert.equal(e.modelStates.optimizerBytes, 8 * A, 'two fp32 AdamW states per adapter parameter');
  assert.equal(e.autocastCacheBytes, 2 * A, 'autocast copies only the fp32 adapters');
  const full = estimate(m, trainOptions());
  assert.ok(e.totalBytes < full.totalBytes / 3, 'no gradients or optimizer states for the 8B base');
});

test('QLoRA: 4-bit weights with their absmax per 64-block, double quantisation, the rest in 16 bits as loaded, one dequantised weight', () => {
  const m = catalogueModel('llama-3-8b');
  const base = (q: Partial<ReturnType<typeof lora>>) => line(trainOptions({ lora: { ...lora(16, 'default'), ...q } }), /frozen base/)!.bytes;
  const nf4 = base({ base: 'nf4' });
  const dq = base({ base: 'nf4', doubleQuant: true });
  const c = countParams(m);
  const quantised = c.total - c.embedding - c.lmHead - c.finalNorm - m.layers * 2 * m.hidden; // every linear weight of the blocks
  const rest = c.total - quantised;
  // from_pretrained with a BitsAndBytesConfig leaves the rest in the checkpoint's 16 bits; only TRL's
  // prepare_model_for_kbit_training casts it to fp32, and a stock script does not run it
  assert.equal(nf4, quantised * (0.5 + 4 / 64) + rest * 2);
  assert.equal(dq, quantised * (0.5 + 1 / 64 + 4 / (64 * 256)) + rest * 2);
  assert.ok(dq < nf4, 'double quantisation stores the absmax in 8 bits');
  // a 4-bit matmul dequantises its weight to 16 bits while it runs (MatMul4Bit), one layer at a time
  const q = trainOptions({ lora: { ...lora(16, 'default'), base: 'nf4' } });
  const withDeq = matmulPeak(q, { dequantisedBytes: 2, fp8: false });
  assert.equal(withDeq.peak, withDeq.input + 2 * withDeq.weight, 'the running layer (an MLP projection) in bf16, beside its input');
  assert.equal(setupOf(m, trainOptions({ lora: lora(16, 'default') })).extras.dequantisedBytes, 0, 'a 16-bit base needs no dequantisation');
  assert.equal(setupOf(m, q).extras.dequantisedBytes, 2);
});

test('optimizers: 8-bit states are two bytes per parameter with no foreach temporaries; paged states live outside the allocator', () => {
  const m = catalogueModel('llama-3-8b');
  const P = countParams(m).total;
  const eight = estimate(m, trainOptions({ precision: 'bf16-pure', optimizer: 'adamw8bit' }));
  assert.ok(Math.abs(eight.modelStates.optimizerBytes / P - 2) < 0.01);
  assert.equal(eight.optimizerTemporariesBytes, 0);
  const paged = plan(m, trainOptions({ precision: 'bf16-pure', optimizer: 'paged-adamw8bit' }), machineFromCatalogue('h200'));
  const states = paged.lines.find((l) => l.field === 'optimizerBytes');
  if (states) assert.equal(states.outsideAllocator, true);
  assert.ok(paged.perGpu.allocatedPeakBytes <= paged.perGpu.totalBytes - (paged.lines.find((l) => l.field === 'optimizerBytes')?.bytes ?? 0));
});

test('optimizer in backward: no step moment, one gradient at a time; refused with gradient accumulation', () => {
  const m = catalogueModel('llama-3-8b');
  const normal = estimate(m, trainOptions({ precision: 'bf16-pure', fusedOptimizer: true }));
  const inBwd = estimate(m, trainOptions({ precision: 'bf16-pure', optimizerInBackward: true }));
  assert.equal(inBwd.otherMoment, undefined);
  // one gradient (at most the largest tensor, the embedding) and its step temporary instead of every gradient
  assert.ok(inBwd.gradientsBytes <= (4 * countParams(m).largestTensor * 2) / 2 && inBwd.gradientsBytes < normal.gradientsBytes / 4);
  assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, optimizerInBackward: true, gradAccum: 4 }), /cannot accumulate/);
});

test('activation offloading keeps about two layers on the GPU and puts the rest in pinned host memory, within --host-memory', () => {
  const m = catalogueModel('llama-3-8b');
  const o = trainOptions({ precision: 'bf16-pure', batch: 8, recompute: 'full' });
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
  // the loss's tensors at their full size: the most they hold at any moment of the step
  const logits = (loss: TrainOptions['loss']) => estimate(m, trainOptions({ precision: 'bf16-pure', loss })).logitsBytes;
  const T = 2048;
  assert.equal(logits('standard'), 3 * 4 * m.vocab * T, 'log-probabilities and two fp32 gradients');
  assert.equal(logits('chunked'), 4 * m.vocab * T + (2 * 4 * m.vocab * T) / 8, "torchtune's 8 chunks");
  // fused: the input's gradient and the output layer's gradient, both made in the forward pass; no logits
  assert.equal(logits('fused'), 2 * m.hidden * T + 2 * m.vocab * m.hidden);
});

test('FSDP2 reduce-scatters every micro-batch, FSDP1 keeps unsharded gradients under no_sync; the root unit gathered for the step', () => {
  const m = catalogueModel('llama-3-8b');
  const c = countParams(m);
  const fsdp = { ...ONE_GPU, gpus: 8, zero: 3 as const };
  // the gradients the optimizer step reads
  const grads = (sharding: TrainOptions['sharding'], gradAccum: number) => {
    const e = estimate(m, trainOptions({ precision: 'bf16-pure', parallel: fsdp, sharding, gradAccum }));
    return (e.peakPhase === 'optimizer-step' ? e.lines : (e.otherMoment?.lines ?? [])).find((l) => l.name === 'gradients')!.bytes;
  };
  assert.equal(grads('fsdp2', 4), (2 * c.total) / 8, 'FSDP2: the shards accumulate (torchtitan and torchtune leave the sync on)');
  assert.equal(grads('fsdp2', 1), (2 * c.total) / 8);
  const fsdp1 = estimate(m, trainOptions({ precision: 'bf16-pure', parallel: fsdp, sharding: 'fsdp1', gradAccum: 4 }));
  assert.ok(
    fsdp1.fullLines.find((l) => l.name === 'gradients')!.bytes >= 2 * c.total,
    "FSDP1 under no_sync: every unit's unsharded gradient between micro-batches",
  );
  assert.equal(grads('fsdp1', 1), (2 * c.total) / 8);
  // the gathered root unit is a tensor of its own beside the shards: all of it, in the gathered dtype
  const root = line(trainOptions({ precision: 'bf16-pure', parallel: fsdp }), /root unit/);
  assert.equal(root!.bytes, (c.embedding + c.lmHead + c.finalNorm) * 2);
  // FSDP2's mixed precision (amp-bf16: fp32 shards) gathers it in bf16 too
  assert.equal(line(trainOptions({ precision: 'amp-bf16', parallel: fsdp }), /root unit/)!.bytes, (c.embedding + c.lmHead + c.finalNorm) * 2);
});

test("accelerate's FSDP1 computes a frozen fp32 base in bf16 (its MixedPrecision casts every FlatParameter); a 4-bit base keeps its storage", () => {
  const m = catalogueModel('llama-3-8b');
  const fsdp = { ...ONE_GPU, gpus: 8, zero: 3 as const };
  const kept = (base: BaseWeights, sharding: TrainOptions['sharding']) =>
    estimate(m, trainOptions({ precision: 'amp-bf16', recompute: 'full', parallel: fsdp, sharding, lora: { ...lora(8, 'all-linear'), base } })).lines.find(
      (l) => l.name === 'activations: layer inputs kept by the checkpoints',
    )!.bytes;
  // each checkpointed layer keeps its input: the residual stream, bf16 once the weights it meets are bf16
  assert.equal(kept('fp32', 'fsdp1') * 2, kept('fp32', 'ddp'), 'fp32 under DDP and autocast (RMSNorm returns its fp32 weight times the input)');
  assert.equal(kept('fp32', 'fsdp1'), kept('bf16', 'fsdp1'));
  assert.equal(kept('nf4', 'fsdp1'), kept('nf4', 'ddp'), 'a quantised base is not cast: its norms are what peft left them');
});

test("per-op checkpointing keeps more than full recomputation and less than none; torchao's fp8 adds the running matmul's casts", () => {
  const m = catalogueModel('llama-3-8b');
  const acts = (recompute: TrainOptions['recompute']) => estimate(m, trainOptions({ precision: 'bf16-pure', batch: 4, recompute })).activationsBytes;
  assert.ok(acts('full') < acts('op') && acts('op') < acts('none'));
  // torchao's float8: the running matmul's weight and input cast to fp8 while it runs
  const o = trainOptions({ precision: 'fp8-torchao' });
  assert.equal(setupOf(catalogueModel('llama-3-8b'), o).extras.fp8, true);
  const f8 = matmulPeak(o, { dequantisedBytes: 0, fp8: true });
  assert.equal(f8.peak, f8.input + f8.weight + f8.inputs, 'its weight and its input in one byte each, beside the input');
});

test('JSON peaks: allocated is the tensors, reserved adds the fragmentation allowance, the total adds the context', () => {
  const r = plan(catalogueModel('llama-3-8b'), trainOptions({ lora: lora(16, 'all-linear') }), machineFromCatalogue('h200'));
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
    [{ fsdp: true, zero: 1, given: ['fsdp', 'zero'] }, /--fsdp and --zero 1 are two strategies: choose one/],
    [{ flashAttention: true, attention: 'eager', given: ['attention', 'flashAttention'] }, /--flash-attention contradicts --attention eager/],
    [{ lora: 8, framework: 'megatron' }, /contradicts --framework megatron/],
    [{ hostMemory: 0 }, /--host-memory/],
  ];
  for (const [i, why] of bad) assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, ...i }), why, JSON.stringify(i));
  const m = catalogueModel('llama-2-7b');
  const mc = machineFromCatalogue('h200');
  assert.throws(() => plan(m, planOptionsFrom({ ...DEFAULT_INPUTS, lora: 5000 }), mc), /--lora 5000 exceeds the smaller side of every wrapped layer/);
  assert.throws(
    () => plan(m, planOptionsFrom({ ...DEFAULT_INPUTS, lora: 8, loraTargets: 'c_attn' }), mc),
    /has no such module; its linear layers are q_proj, k_proj/,
  );
  // the defaults are never a contradiction
  assert.doesNotThrow(() => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer' }));
});

test("the tests' base runs are the planner's default runs, with a flat 5% allowance in place of the allocator replay", () => {
  // testing/plan-options.ts writes its base runs out; a change of the planner's defaults shows here first
  const stock = planOptionsFrom(DEFAULT_INPUTS) as unknown as Record<string, unknown>;
  const base = trainOptions() as unknown as Record<string, unknown>;
  for (const k of Object.keys(base)) if (k !== 'fragmentation') assert.deepEqual(stock[k], base[k], `train: ${k}`);
  assert.equal(stock.fragmentation, undefined, 'the planner replays the allocator unless told a share');
  const serving = planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer' }) as unknown as Record<string, unknown>;
  const inferBase = inferOptions() as unknown as Record<string, unknown>;
  for (const k of Object.keys(inferBase)) if (k !== 'fragmentation' && k !== 'serve') assert.deepEqual(serving[k], inferBase[k], `infer: ${k}`);
});

test("targets take each family's module names as transformers names them, and the output layer", () => {
  const phi2 = normaliseConfig(
    { model_type: 'phi', hidden_size: 2560, intermediate_size: 10240, num_hidden_layers: 32, num_attention_heads: 32, vocab_size: 51200 },
    'test',
    'phi-2',
  );
  const names = (m: ModelConfig) => linearModules(m).map((l) => l.path.split('.').pop());
  assert.deepEqual(names(phi2), ['q_proj', 'k_proj', 'v_proj', 'dense', 'fc1', 'fc2']);
  const phi3 = normaliseConfig(
    { model_type: 'phi3', hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 32, num_attention_heads: 32, vocab_size: 32064 },
    'test',
    'phi-3',
  );
  assert.deepEqual(names(phi3), ['qkv_proj', 'o_proj', 'gate_up_proj', 'down_proj']);
  assert.equal(linearModules(phi3).find((l) => l.path.endsWith('gate_up_proj'))!.out, 2 * 8192, 'gate and up fused: twice the width');
  const neox = normaliseConfig(
    { model_type: 'gpt_neox', hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16, num_attention_heads: 8, vocab_size: 50304 },
    'test',
    'pythia',
  );
  assert.deepEqual(names(neox), ['query_key_value', 'dense', 'dense_h_to_4h', 'dense_4h_to_h']);
  // PEFT's defaults by model_type (peft src/peft/utils/constants.py at 5d602fd)
  const trainable = (m: ModelConfig, targets: TrainOptions['lora'] extends infer L ? (L extends { targets: infer T } ? T : never) : never, r = 8) =>
    adapterParams(m, countParams(m), lora(r, targets));
  assert.equal(trainable(neox, 'default'), 16 * 8 * (2048 + 3 * 2048), 'gpt_neox: query_key_value');
  assert.equal(trainable(phi2, 'default'), 32 * 8 * (2 * (2560 + 2560) + (2560 + 10240) + (10240 + 2560)), 'phi: q_proj, v_proj, fc1, fc2');
  assert.throws(() => trainable(phi3, 'default'), /PEFT has no default target modules for phi3: give --lora-targets/);
  // the output layer: r x (hidden + vocabulary) more, as PEFT wraps lm_head (GPT-NeoX's is embed_out)
  const llama = catalogueModel('llama-2-7b');
  assert.equal(trainable(llama, ['q_proj', 'v_proj', 'lm_head']) - trainable(llama, ['q_proj', 'v_proj']), 8 * (4096 + 32000));
  assert.equal(trainable(neox, ['query_key_value', 'embed_out']) - trainable(neox, 'default'), 8 * (2048 + 50304));
  assert.throws(() => trainable(neox, ['lm_head']), /has no such module; its linear layers are .* and the output layer embed_out/);
  // all-linear leaves the output layer out, as PEFT does
  assert.equal(trainable(llama, 'all-linear'), 32 * 8 * (4 * (4096 + 4096) + 3 * (4096 + 11008)));
});

test("a rank above a small layer's side is taken with a note, as PEFT takes it; above every wrapped layer's, refused", () => {
  // a small Mixtral's router has 8 outputs; PEFT wraps it under all-linear at r=16 (measured on an H200)
  const m = normaliseConfig(
    {
      model_type: 'mixtral',
      hidden_size: 1024,
      intermediate_size: 3584,
      num_hidden_layers: 8,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      num_local_experts: 8,
      num_experts_per_tok: 2,
      vocab_size: 32000,
    },
    'test',
    'mixtral-mini',
  );
  const r = plan(m, trainOptions({ lora: lora(16, 'all-linear') }), machineFromCatalogue('h200'));
  assert.ok(
    r.notes.some((n) => /rank 16 exceeds gate's smaller side \(1024 -> 8\)/.test(n)),
    r.notes.join('\n'),
  );
  assert.throws(
    () => plan(m, trainOptions({ lora: lora(16, ['gate']) }), machineFromCatalogue('h200')),
    /exceeds the smaller side of every wrapped layer \(at most 8\)/,
  );
});
