/**
 * How a family's layer differs from the block activations.ts counts (GPT-2's for family 'gpt', Llama's for 'llama'),
 * in bytes kept per token for the backward pass, tensor by tensor as transformers runs each family: the attention's
 * saved inputs when a fused q,k,v projection stays alive under a view or heads are not hidden / heads wide, latent
 * attention, q/k norms, the extra norms of Gemma 2/3, a parallel block's shared norm, a fused activation kernel instead
 * of GPT-2's Python GELU; and Gemma 2's softcapping tensors. activations.ts and train.ts call these hooks; a model whose
 * layer is the archetype's gets 0 from each.
 */
import type { ModelConfig } from './model-config.js';
import type { Line, Precision } from './options.js';

/** Bytes of an activation element: matmul outputs and what follows them. */
export const activationBytes = (p: Precision): number => (p === 'fp32' ? 4 : 2);
/** Bytes of the residual stream (fp32 under autocast, whose weights are fp32). */
export const streamBytes = (p: Precision): number => (p === 'fp32' || p.startsWith('amp') ? 4 : 2);
/** Bytes one norm keeps per element, as activations.ts counts a norm (input and normalised output, and autocast's cast). */
const normBytes = (p: Precision): number => (p === 'fp32' ? 8 : 10);
/** Bytes a layer's output keeps per element as the next matmul's input after a norm (autocast casts it to 16 bits). */
const linearInputBytes = (p: Precision): number => (p === 'fp32' ? 4 : 2);

/** Elements per token the attention block keeps as the archetype counts it: q, k, v, the output and its merged copy. */
const ARCHETYPE_ATTENTION = 5;

/** Elements per token the attention block of `m` keeps, with the same rules as the archetype. */
function attentionElements(m: ModelConfig): number {
  const q = m.heads * m.headDim;
  const kv = m.kvHeads * m.headDim;
  if (m.mla) {
    const a = m.mla;
    const qk = m.heads * (a.qkNopeHeadDim + a.qkRopeHeadDim);
    // q and k after concatenating their rotated parts; kv_b's output, alive under the value view; the latent's norm
    // (input, output) and kv_b's input; with a query bottleneck, its norm and q_b's input likewise; output and merge
    const latent = 3 * a.kvLoraRank + (a.qLoraRank ? 3 * a.qLoraRank : 0);
    return 2 * qk + m.heads * (a.qkNopeHeadDim + a.vHeadDim) + latent + 2 * m.heads * a.vHeadDim;
  }
  const rotary = m.arch.rotaryFraction > 0;
  if (m.family === 'gpt') {
    // GPT-2's block keeps the fused projection's output (q, k, v are views of it); a rotary family keeps rotated
    // copies of q and k beside it; separate projections keep what SDPA takes (k, v repeated to every head)
    const inputs = m.arch.fusedQkv ? q + 2 * kv + (rotary ? q + kv : 0) : q + 2 * (m.kvHeads < m.heads ? q : kv);
    return inputs + 2 * q;
  }
  // Llama's block: rotated q, k and v repeated to every head for SDPA; a fused projection (Phi-3) stays alive while
  // the value is a view of it, which it is without grouped-query attention (no repeat copies it)
  const fusedAlive = m.arch.fusedQkv && m.kvHeads === m.heads ? q + 2 * kv : 0;
  return 3 * q + fusedAlive + 2 * q;
}

/**
 * Bytes per token one layer of `m` keeps beyond (or short of) the archetype activations.ts counts for its family.
 * @returns 0 for GPT-2 and Llama themselves.
 */
export function familyLayerDeltaBytesPerToken(m: ModelConfig, precision: Precision): number {
  const e = activationBytes(precision);
  const h = m.hidden;
  let delta = (attentionElements(m) - ARCHETYPE_ATTENTION * h) * e;
  if (m.arch.qkNorm !== 'none') delta += (m.heads + m.kvHeads) * m.headDim * normBytes(precision);
  if (m.family === 'llama') {
    if (m.arch.normsPerLayer > 2) delta += (m.arch.normsPerLayer - 2) * h * normBytes(precision);
    return delta;
  }
  // GPT archetype: two LayerNorms on two residual states, GPT-2's gelu_new as five intermediate-sized tensors
  if (m.arch.parallelResidual) {
    // both branches read one state: its norm input is kept once; with one norm (Phi, Falcon-7B) its output too
    delta -= h * streamBytes(precision);
    if (m.arch.normsPerLayer === 1) delta -= h * linearInputBytes(precision);
  }
  if (m.arch.fusedActivation) {
    // a fused GELU keeps its input (the fc output) and its output (the next matmul's input): two tensors, not five
    const python = precision === 'fp32' ? 20 : precision.startsWith('amp') ? 14 : 10;
    delta -= (python - 2 * e) * m.intermediate;
  }
  return delta;
}

/**
 * Extra bytes per attention score that the math kernel keeps with Gemma 2's softcapping (eager attention, as
 * transformers recommends for training Gemma 2): tanh's output, besides the softmax the archetype counts. No SDPA
 * kernel applies the cap: transformers' SDPA path drops it.
 */
export function softcapScoreBytes(m: ModelConfig, precision: Precision): number {
  return m.arch.attnSoftcap ? activationBytes(precision) : 0;
}

/**
 * Gemma 2's final_logit_softcapping: tanh on the logits keeps its output for the backward pass, a logit-sized tensor in
 * the logits' dtype (16 bits under autocast) beside the fp32 copies the loss makes.
 * @returns bytes per token.
 */
export function finalSoftcapBytesPerToken(m: ModelConfig, precision: Precision): number {
  return m.arch.finalSoftcap ? m.vocab * activationBytes(precision) : 0;
}

/** The final softcap's tanh output as a line of the backward moment, for `tokens` tokens on this GPU (none without). */
export function finalSoftcapLines(m: ModelConfig, precision: Precision, tokens: number): Line[] {
  const bytes = finalSoftcapBytesPerToken(m, precision) * tokens;
  return bytes
    ? [
        {
          name: 'loss: softcapped logits (tanh output)',
          bytes,
          note: `final_logit_softcapping ${m.arch.finalSoftcap}: tanh keeps its output`,
          field: 'logitsBytes',
        },
      ]
    : [];
}
