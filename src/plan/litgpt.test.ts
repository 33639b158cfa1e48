/**
 * `--framework litgpt`: each mechanism of LitGPT's fine-tuning scripts (litgpt.ts) checked against a count made here
 * from the configs' published numbers and the code it follows, never against the planner's own output.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { quantisedBytesPerWeight } from './adapters.js';
import { setupOf } from './train.js';
import { estimate } from './estimate.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import { normaliseConfig, type ModelConfig } from './model-config.js';
import type { Estimate, Line, TrainOptions } from './options.js';

/** Written from the published config.json of each checkpoint. */
const LLAMA_2_7B = {
  model_type: 'llama',
  hidden_size: 4096,
  intermediate_size: 11008,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 32,
  vocab_size: 32000,
  tie_word_embeddings: false,
};
const PHI_2 = {
  model_type: 'phi',
  hidden_size: 2560,
  intermediate_size: 10240,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  partial_rotary_factor: 0.4,
  vocab_size: 51200,
  hidden_act: 'gelu_new',
  tie_word_embeddings: false,
};
const PHI_3_MINI = {
  model_type: 'phi3',
  hidden_size: 3072,
  intermediate_size: 8192,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 32,
  vocab_size: 32064,
  tie_word_embeddings: false,
};
const GEMMA_2_2B = {
  model_type: 'gemma2',
  hidden_size: 2304,
  intermediate_size: 9216,
  num_hidden_layers: 26,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 256,
  vocab_size: 256000,
  attn_logit_softcapping: 50.0,
  final_logit_softcapping: 30.0,
  query_pre_attn_scalar: 256,
  sliding_window: 4096,
  tie_word_embeddings: false,
};

const cfg = (c: object, name: string): ModelConfig => normaliseConfig(c, 'test', name);

/** A LitGPT QLoRA run as its config_hub yamls set it: bf16-true, micro-batch 2 x 512, paged AdamW, nf4. */
const QLORA: Partial<PlanInputs> = {
  framework: 'litgpt',
  precision: 'bf16-pure',
  batch: 2,
  seq: 512,
  lora: 32,
  loraTargets: 'q_proj,v_proj',
  loraDropout: 0.05,
  baseWeights: 'nf4',
  optimizer: 'paged-adamw',
  loraDtype: 'bf16',
};
const options = (over: Partial<PlanInputs>): TrainOptions => planOptionsFrom({ ...DEFAULT_INPUTS, ...over }) as TrainOptions;
/** The lines at their full size whose name matches. */
const lines = (e: Estimate, re: RegExp): Line[] => e.fullLines.filter((l) => re.test(l.name));
const bytesOf = (e: Estimate, re: RegExp): number => lines(e, re).reduce((s, l) => s + l.bytes, 0);

test('LitGPT runs bitsandbytes 0.42 (it pins it) under a 4-bit base; a release from 0.43.2 keeps no input; a 16-bit base has none to keep', () => {
  assert.equal(options(QLORA).lora?.quantKeepsInput, true, 'LitGPT warns on any bitsandbytes but 0.42.0');
  // bitsandbytes PR #1270 (0.43.2) stopped keeping the input: 0.43.0 and 0.43.1 still keep it
  assert.equal(options({ ...QLORA, bnbVersion: '0.43.1' }).lora?.quantKeepsInput, true);
  assert.equal(options({ ...QLORA, bnbVersion: '0.43.2' }).lora?.quantKeepsInput, false);
  assert.equal(options({ ...QLORA, bnbVersion: '0.45' }).lora?.quantKeepsInput, false);
  assert.equal(options({ ...QLORA, baseWeights: 'bf16', optimizer: 'adamw' }).lora?.quantKeepsInput, false);
  assert.equal(options({ ...QLORA, framework: 'pytorch' }).lora?.quantKeepsInput, false, 'a current bitsandbytes by default elsewhere');
  assert.equal(options({ ...QLORA, loss: 'standard' }).loss, 'chunked', "LitGPT's scripts always chunk the loss");
  assert.equal(options({ ...QLORA, loraDtype: undefined }).lora?.dtype, 'bf16', 'adapters made under bf16-true are bf16');
  assert.equal(options({ ...QLORA, loraDtype: undefined, framework: 'pytorch' }).lora?.dtype, undefined, "PEFT's default elsewhere");
});

test('--framework litgpt refuses what its scripts never do, naming the contradiction', () => {
  const bad: Array<[Partial<PlanInputs>, RegExp]> = [
    [{ loss: 'standard', given: ['loss'] }, /runs its own chunked loss: it contradicts --loss standard/],
    [{ loss: 'fused', given: ['loss'] }, /contradicts --loss fused/],
    [{ compile: true, recompute: 'full' }, /--compile is not something LitGPT/],
    [{ activationOffload: true }, /--activation-offload is not something LitGPT/],
  ];
  for (const [i, why] of bad) assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, ...QLORA, ...i }), why, JSON.stringify(i));
});

test("Lightning quantises LitGPT's output layer too: its weight in 4 bits, and its fp16 dequantised copy with the bf16 cast while it runs", () => {
  const m = cfg(LLAMA_2_7B, 'llama-2-7b');
  const head = 32000 * 4096;
  const lit = estimate(m, options(QLORA));
  const hf = estimate(m, options({ ...QLORA, framework: 'pytorch', bnbVersion: '0.42' }));
  const q = quantisedBytesPerWeight('nf4', false, 4096);
  const saved = bytesOf(hf, /frozen base/) - bytesOf(lit, /frozen base/);
  // the output layer moves from 2 bytes per weight to the 4-bit format: nothing else in the base changes
  assert.ok(Math.abs(saved - head * (2 - q)) < 1, `${saved} vs ${head * (2 - q)}`);
  // a 4-bit matmul's weight while it runs: LitGPT's fp16 (as Lightning quantised it) and its bf16 cast; a Hugging Face
  // run's in the 16 bits it loaded
  assert.equal(setupOf(m, options(QLORA)).extras.dequantisedBytes, 4);
  assert.equal(setupOf(m, options({ ...QLORA, framework: 'pytorch', bnbVersion: '0.42' })).extras.dequantisedBytes, 2);
  // the output layer is LitGPT's largest quantised matmul: its dequantised copies at the start of the backward pass
  assert.ok(lit.allocatedPeakBytes > hf.allocatedPeakBytes - head * (2 - q), 'the output layer quantised, then dequantised while it runs');
});

test("the previous micro-batch's graph lives through the next forward pass: its logits, and before bitsandbytes 0.43.2 every quantised layer's input", () => {
  const tokens = 2 * 512;
  const cases: Array<[string, object, number]> = [
    // Llama: the attention's norm output, SDPA's output (heads x head_dim = hidden), the MLP's norm output, the product
    ['llama-2-7b', LLAMA_2_7B, 32 * 2 * (4096 + 4096 + 4096 + 11008)],
    // Phi-2: one norm feeds attention and the MLP (one tensor), SDPA's output, the GELU output
    ['phi-2', PHI_2, 32 * 2 * (2560 + 2560 + 10240)],
  ];
  for (const [name, c, perToken] of cases) {
    const m = cfg(c, name);
    const e = estimate(m, options({ ...QLORA, loraTargets: name === 'phi-2' ? 'q_proj,v_proj' : QLORA.loraTargets }));
    assert.equal(bytesOf(e, /previous micro-batch: quantised/), perToken * tokens, name);
    assert.equal(bytesOf(e, /previous micro-batch: its logits/), 2 * m.vocab * tokens, name);
    const later = estimate(m, options({ ...QLORA, bnbVersion: '0.43.2' }));
    assert.equal(bytesOf(later, /previous micro-batch: quantised/), 0, `${name}: 0.43.2 keeps no input as a ctx attribute`);
    assert.ok(e.totalBytes > later.totalBytes, `${name}: the kept inputs raise the peak`);
  }
});

test("LitGPT's loss: logits and log-probabilities in the logits' dtype, and the backward pass's gradients of one 128-token chunk", () => {
  const m = cfg(LLAMA_2_7B, 'llama-2-7b');
  const e = estimate(m, options({ ...QLORA, baseWeights: 'bf16', optimizer: 'adamw', batch: 4, seq: 1024, gradAccum: 1 }));
  // a 16-bit base keeps no inputs past the backward pass: the start of the backward pass is the peak
  assert.equal(e.peakPhase, 'backward');
  assert.equal(bytesOf(e, /^loss: (logits|log-probabilities) \(LitGPT/), 2 * 2 * 32000 * 4 * 1024, 'bf16 logits and bf16 log-probabilities, every token');
  assert.equal(bytesOf(e, /gradients of one chunk/), 2 * 2 * 32000 * 4 * 128, 'two bf16 tensors of one chunk: 4 sequences x 128 tokens');
  assert.equal(bytesOf(e, /fp32 log-probabilities/), 0, 'no fp32 upcast');
});

test("Gemma 2's softcapped attention runs outside SDPA in LitGPT: tanh's output, softmax's fp32 output and its bf16 cast per score", () => {
  const m = cfg(GEMMA_2_2B, 'gemma-2-2b');
  const o = { ...QLORA, baseWeights: 'bf16' as const, optimizer: 'adamw' as const, loraTargets: 'q_proj,v_proj' };
  const lit = estimate(m, options(o));
  const hf = estimate(m, options({ ...o, framework: 'pytorch' }));
  assert.equal(bytesOf(lit, /attention matrices/), (2 + 4 + 2) * 2 * 8 * 512 * 512 * 26);
  assert.equal(bytesOf(hf, /attention matrices/), 0, "transformers' SDPA path drops the cap and runs a fused kernel");
});

test("LitGPT's own blocks: Phi-2's GELU is one fused op, and Phi-3's gate and up are two adapted layers (fc_1, fc_2)", () => {
  const phi2 = cfg(PHI_2, 'phi-2');
  const lora = { ...QLORA, baseWeights: 'bf16' as const, optimizer: 'adamw' as const, loraTargets: 'q_proj,v_proj' };
  const lit2 = estimate(phi2, options(lora));
  const hf2 = estimate(phi2, options({ ...lora, framework: 'pytorch' }));
  // transformers' gelu_new keeps several f-wide tensors of its formula; F.gelu(approximate='tanh') keeps its input
  assert.ok(bytesOf(lit2, /activations per layer/) < bytesOf(hf2, /activations per layer/));
  const phi3 = cfg(PHI_3_MINI, 'phi-3-mini');
  const mlp = { ...lora, lora: 8, loraTargets: 'gate_up_proj' };
  const r = 8;
  const litAdapters = bytesOf(estimate(phi3, options(mlp)), /parameters: adapters/) / 2;
  const hfAdapters = bytesOf(estimate(phi3, options({ ...mlp, framework: 'pytorch' })), /parameters: adapters/) / 2;
  assert.equal(hfAdapters, 32 * r * (3072 + 2 * 8192), 'PEFT wraps the fused gate_up_proj once');
  assert.equal(litAdapters, 32 * 2 * r * (3072 + 8192), 'LitGPT wraps fc_1 and fc_2, each r x (in + out)');
});

test("Lightning's FSDPStrategy (use_orig_params=True): a LoRA block's FlatParameter requires grad, so every unit's gradient is made whole", () => {
  const m = cfg(LLAMA_2_7B, 'llama-2-7b');
  // Lit-GPT's finetune/lora.py over two GPUs: FSDP1 with every Block a unit and checkpointed, fabric.no_backward_sync
  const fsdp: Partial<PlanInputs> = { ...QLORA, baseWeights: 'bf16', optimizer: 'adamw', batch: 1, gradAccum: 4, gpus: 2, fsdp: '1', recompute: 'full' };
  const lit = estimate(m, options(fsdp));
  const hf = estimate(m, options({ ...fsdp, framework: 'pytorch' }));
  const r = 32;
  const adapters = 2 * r * (4096 + 4096); // q_proj and v_proj, r x (in + out) each
  // one Llama block: q, k, v, o; gate, up, down; two RMSNorm weights; its adapters
  const block = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096 + adapters;
  // no_sync keeps each unit's gradient unsharded in bf16 between micro-batches: the frozen weights' too; the root
  // unit (embedding, final norm, output layer) holds no adapter and makes none
  assert.equal(bytesOf(lit, /each unit whole/), 32 * block * 2);
  // accelerate's FSDP1 as the PEFT configs run it (use_orig_params false): the adapters' gradients alone
  assert.equal(bytesOf(hf, /each unit whole/), 0);
  assert.equal(bytesOf(hf, /^gradients$/), 32 * adapters * 2);
  // the optimizer still steps the adapters only: AdamW's two bf16 states, sharded over the two GPUs
  assert.equal(bytesOf(lit, /optimizer states/), (32 * adapters * 2 * 2) / 2);
  // the whole units' gradients outweigh this GPU's shard of the weights: sharding barely lowers the peak
  assert.ok(lit.allocatedPeakBytes > estimate(m, options({ ...fsdp, gpus: 1, fsdp: false })).allocatedPeakBytes);
});
