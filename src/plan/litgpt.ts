/**
 * `--framework litgpt`: what LitGPT's fine-tuning scripts do differently from a Hugging Face + PEFT run, each from the
 * code that ran for LitGPT's published table (Lightning-AI/litgpt at 00af8b0, Lightning 2.4.0.dev20240728 as it pins,
 * bitsandbytes 0.42.0 as it pins; docs/plan-training.md names file and line):
 *
 * - the model is LitGPT's own (litgpt/model.py): its MLPs call `torch.nn.functional.gelu` (tanh approximation for Phi,
 *   Gemma), one fused op that keeps its input, where transformers' `gelu_new` is a Python formula of several tensors;
 * - under `quantize: bnb.*` Lightning's BitsandbytesPrecision replaces every `torch.nn.Linear` while the model is
 *   built, the output layer too, and quantises each weight from an fp16 copy, so bitsandbytes dequantises to fp16 and
 *   MatMul4Bit casts that to the bf16 input: two copies of the layer's weight while it runs;
 * - the training loop keeps `logits` and `loss` of a micro-batch until the next micro-batch's are assigned, so the
 *   previous graph lives through the next forward pass: its logits, and (bitsandbytes before 0.43.2, whose MatMul4Bit
 *   keeps its input as a ctx attribute that the backward pass does not free) every quantised layer's input;
 * - the output layer and the cross-entropy run in chunks of 128 tokens of the sequence, in the logits' dtype (no fp32
 *   upcast): the logits and their log-probabilities kept, the backward pass adding two chunk-sized gradients.
 */
import type { ModelConfig } from './model-config.js';
import { linearModules, quantisedBase } from './adapters.js';
import type { Line, TrainOptions } from './options.js';

/** LitGPT's lm_head_chunk_size in finetune/lora.py, full.py and adapter.py (`model(input_ids, lm_head_chunk_size=128)`). */
export const LITGPT_CHUNK_TOKENS = 128;

/** True when the plan follows LitGPT's scripts. */
export const isLitgpt = (o: Pick<TrainOptions, 'framework'>): boolean => o.framework === 'litgpt';

/**
 * The model as LitGPT's code runs it: its MLP activations are single fused ops (F.gelu, F.silu), and its LLaMAMLP
 * keeps gate and up as two linear layers (fc_1, fc_2) where a checkpoint fuses them (Phi-3's gate_up_proj), each
 * its own LoRALinear under lora_mlp.
 */
export function litgptModel(m: ModelConfig): ModelConfig {
  return { ...m, arch: { ...m.arch, fusedActivation: true, separateGateUp: true } };
}

/**
 * LitGPT calls SDPA (a fused kernel in 16 bits) except under attention softcapping (Gemma 2), where its
 * CausalSelfAttention computes the scores itself (model.py: "with softcapping we cannot use SDPA").
 */
export function litgptFusedAttention(m: ModelConfig, o: Pick<TrainOptions, 'attention' | 'precision'>): boolean {
  if (m.arch.attnSoftcap) return false;
  return o.attention === 'eager' ? false : o.precision !== 'fp32' || o.attention === 'flash';
}

/**
 * Bytes per attention score LitGPT's softcapped attention keeps: tanh's output (kept by its backward), softmax's fp32
 * output (`softmax(scores, dim=-1, dtype=torch.float)`) and its cast back to the inputs' dtype (kept by `scores @ v`).
 */
export function litgptScoreBytes(o: Pick<TrainOptions, 'precision'>): number {
  const C = o.precision === 'fp32' ? 4 : 2;
  return C + 4 + (C === 4 ? 0 : C);
}

/** True when Lightning quantises the output layer too: LitGPT under a bitsandbytes base. */
export function quantisesOutput(o: Pick<TrainOptions, 'framework' | 'lora'>): boolean {
  return isLitgpt(o) && !!o.lora && quantisedBase(o.lora.base);
}

/** Bytes per value of the logits and of the blocks' outputs (the compute dtype). */
const computeBytes = (o: TrainOptions): number => (o.precision === 'fp32' ? 4 : 2);

/**
 * The dequantised weight of the largest quantised layer while its matmul runs, the output layer included: bitsandbytes
 * dequantises to the dtype the weight was quantised from (Lightning: fp16) and MatMul4Bit casts it to the input's
 * dtype, so a bf16 run holds both copies for a moment.
 */
export function litgptDequantised(m: ModelConfig, o: TrainOptions): Line | undefined {
  if (!quantisesOutput(o)) return undefined;
  const tp = o.parallel.tp;
  const layer = Math.max(m.vocab * m.hidden, ...linearModules(m).map((l) => l.in * l.out)) / tp;
  const bytes = o.precision === 'fp32' ? 2 + 4 : 2 + (o.precision === 'amp-bf16' ? 2 : computeBytes(o));
  const twice = bytes > 2;
  return {
    name: 'bitsandbytes: a dequantised weight (fp16, and its cast)',
    bytes: layer * bytes,
    note: `the largest quantised layer (${m.vocab * m.hidden >= Math.max(...linearModules(m).map((l) => l.in * l.out)) ? 'the output layer: Lightning quantises it too' : 'a block layer'}) dequantised to fp16, as Lightning quantised it${twice ? ', and cast to the input dtype: both for a moment' : ''}`,
    field: 'workspaceBytes',
  };
}

/** Bytes per token of the distinct inputs of the quantised linear layers one block runs (one tensor per site). */
function quantInputsPerToken(m: ModelConfig, C: number): number {
  const shared = m.arch.parallelResidual && m.arch.normsPerLayer === 1; // Phi, Falcon-7B: one norm feeds both
  const sites = new Map<string, number>();
  for (const l of linearModules(m)) sites.set(shared && l.site === 'mlp-norm' ? 'attn-norm' : l.site, l.in);
  let sum = 0;
  for (const w of sites.values()) sum += w;
  return sum * C;
}

/** LitGPT's chunked loss: what the forward pass keeps, and what the backward pass starts with. */
export function litgptLossLines(m: ModelConfig, o: TrainOptions): { kept: Line[]; backward: Line[] } {
  const tokens = o.batch * o.seq;
  const V = m.vocab / o.parallel.tp;
  const C = computeBytes(o);
  const chunk = o.batch * Math.min(LITGPT_CHUNK_TOKENS, o.seq);
  const field = 'logitsBytes' as const;
  return {
    kept: [
      {
        name: 'loss: logits and log-probabilities (LitGPT, 128-token chunks)',
        bytes: 2 * C * V * tokens,
        note: `${C} bytes x ${m.vocab} vocabulary x ${tokens} tokens, twice: the loop's logits list and cross_entropy's log_softmax output, in the logits' dtype`,
        field,
      },
    ],
    backward: [
      {
        name: 'loss backward: gradients of one chunk',
        bytes: 2 * C * V * chunk,
        note: `every chunk's cross-entropy runs backward before the output layer's: one chunk (${chunk} tokens) of log-probability and logit gradients beyond the freed log-probabilities`,
        field,
      },
    ],
  };
}

/**
 * What the previous micro-batch leaves alive while the next forward pass ends: LitGPT's loop reassigns `logits` and
 * `loss` only once the new ones exist, so the old logits stay, and before bitsandbytes 0.43.2 every quantised layer's
 * input that MatMul4Bit kept as a ctx attribute (the backward pass frees saved tensors, not attributes).
 */
export function litgptPreviousStep(m: ModelConfig, o: TrainOptions): Line[] {
  const tokens = o.batch * o.seq;
  const tp = o.parallel.tp;
  const C = computeBytes(o);
  const lines: Line[] = [
    {
      name: 'previous micro-batch: its logits (LitGPT loop)',
      bytes: (C * m.vocab * tokens) / tp,
      note: "the loop's `logits` list is reassigned only after the next forward pass returns",
      field: 'logitsBytes',
    },
  ];
  if (quantisesOutput(o) && o.lora?.quantKeepsInput) {
    // block 0's attention input does not require grad (frozen embedding and norm), so MatMul4Bit keeps nothing there;
    // the output layer's input (the final norm's output, h wide) is kept instead: the two cancel
    const perToken = (m.layers / o.parallel.pp) * quantInputsPerToken(m, C);
    lines.push({
      name: "previous micro-batch: quantised layers' inputs (bitsandbytes < 0.43.2)",
      bytes: (perToken * tokens) / tp,
      note: `MatMul4Bit keeps its input as ctx.tensors, freed only with the graph, which the loop's \`loss\` holds until the next loss is assigned: ${Math.round(perToken / (m.layers / o.parallel.pp))} bytes per token and layer`,
      field: 'activationsBytes',
    });
  }
  return lines;
}
