/**
 * What a mixture-of-experts layer keeps for the backward pass beyond its experts' MLP tensors (which activations.ts
 * counts as an MLP as wide as the experts a token visits), as transformers runs its MoE blocks (Mixtral, Qwen-MoE,
 * DeepSeek): the router's probabilities in fp32, top-k's indices and weights, and for every (token, expert) pair the
 * token's hidden state gathered into the expert's batch (`hidden_states[top_x]`), the expert's output kept by the
 * multiplication with its routing weight, and the index tensors the gather, the weight lookup and index_add_ keep.
 * Qwen2-MoE's shared expert adds its output, kept by its sigmoid gate.
 */
import { activationBytes, streamBytes } from './family-activations.js';
import type { ModelConfig } from './model-config.js';
import type { Precision } from './options.js';

/** int64 indices: the pair's token (kept by the gather and index_add_) and its top-k slot (kept by the weight lookup). */
const INDEX_BYTES_PER_PAIR = 2 * 8;

/**
 * Bytes per token one MoE layer keeps beyond its experts' MLP tensors.
 * @returns 0 for a dense model.
 */
export function moeLayerExtraBytesPerToken(m: ModelConfig, precision: Precision, expertsTrain = true): number {
  const moe = m.moe;
  if (!moe) return 0;
  const h = m.hidden;
  const e = activationBytes(precision);
  const k = moe.expertsPerToken;
  const amp = precision.startsWith('amp');
  // the gathered input is in the residual's dtype (fp32 under autocast, which casts it for the expert's matmuls)
  // (frozen experts under adapters keep no input for their weights' gradient: only the output the weighting keeps)
  const perPair = ((expertsTrain ? streamBytes(precision) + (amp ? 2 : 0) : 0) + e) * h + INDEX_BYTES_PER_PAIR;
  // softmax (or sigmoid) over the experts in fp32; top-k's values and indices, their normalised and cast weights
  const router = moe.experts * 4 + k * (4 + 8 + 4 + e) + (amp ? 2 * h : 0);
  const sharedGate = moe.sharedExpertGate ? h * e + 4 : 0;
  return k * perPair + router + sharedGate;
}
