/**
 * Gemma 2's softcapping tensors, which train.ts adds to the attention matrices and the loss, and the element sizes
 * moe-activations.ts counts in. The rest of a family's block (q/k norms, extra norms, parallel blocks, fused GELU,
 * rotary copies, latent attention) is counted in activations.ts's savedBytesPerToken from the model's ArchTraits.
 */
import type { ModelConfig } from './model-config.js';
import type { Line, Precision } from './options.js';

/** Bytes of an activation element: matmul outputs and what follows them. */
export const activationBytes = (p: Precision): number => (p === 'fp32' ? 4 : 2);
/** Bytes of the residual stream (fp32 under autocast, whose weights are fp32). */
export const streamBytes = (p: Precision): number => (p === 'fp32' || p.startsWith('amp') ? 4 : 2);
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
