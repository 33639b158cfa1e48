/** Parameter counts of a transformer, per part, from its shape; and the KV cache each family keeps per token. */
import type { ModelConfig } from './model-config.js';

export interface ParamCounts {
  /** Token embeddings (+ learned position embeddings). */
  embedding: number;
  /** Output projection; 0 when tied to the embedding. */
  lmHead: number;
  finalNorm: number;
  /** One dense layer: attention, dense MLP, norms. */
  denseLayer: number;
  /** One MoE layer: attention, router, every expert, shared experts, norms. */
  moeLayer: number;
  denseLayers: number;
  moeLayers: number;
  attention: number;
  /** Parameters of one routed expert. */
  expert: number;
  /** Parameters outside the language model (a vision tower), counted in total only. */
  extra: number;
  total: number;
  /** Parameters a token uses (MoE: only its experts). */
  activePerToken: number;
  /** Largest single tensor (optimizer temporaries scale with it). */
  largestTensor: number;
}

/** Parameters of one norm over `width` values. */
function normParams(m: ModelConfig, width: number): number {
  return m.norm === 'layernorm' ? 2 * width : m.norm === 'rmsnorm' ? width : 0;
}

/** Parameters of one MLP of intermediate size `f`. */
function mlpParams(m: ModelConfig, f: number): number {
  const h = m.hidden;
  return m.gatedMlp ? 3 * h * f + (m.arch.mlpBias ? 2 * f + h : 0) : 2 * h * f + (m.arch.mlpBias ? f + h : 0);
}

/** The attention block's parameters: projections, their biases, q/k norms (or MLA's low-rank projections). */
function attentionParams(m: ModelConfig): number {
  const h = m.hidden;
  const H = m.heads;
  if (m.mla) {
    const a = m.mla;
    const qk = a.qkNopeHeadDim + a.qkRopeHeadDim;
    // q: directly h -> heads x qk, or through the q_lora_rank bottleneck with its RMSNorm
    const q = a.qLoraRank ? h * a.qLoraRank + a.qLoraRank + a.qLoraRank * H * qk : h * H * qk;
    // kv: h -> latent + rope key, the latent's RMSNorm, latent -> heads x (nope key + value)
    const kv = h * (a.kvLoraRank + a.qkRopeHeadDim) + a.kvLoraRank + a.kvLoraRank * H * (a.qkNopeHeadDim + a.vHeadDim);
    return q + kv + H * a.vHeadDim * h;
  }
  const d = m.headDim;
  const q = H * d;
  const kv = m.kvHeads * d;
  const qkNorm = m.arch.qkNorm === 'head' ? 2 * d : m.arch.qkNorm === 'full' ? q + kv : 0;
  return h * (q + 2 * kv) + q * h + (m.arch.qkvBias ? q + 2 * kv : 0) + (m.arch.outBias ? h : 0) + qkNorm;
}

/** @returns the parameter counts of every part of `m`. */
export function countParams(m: ModelConfig): ParamCounts {
  const h = m.hidden;
  const attention = attentionParams(m);
  const norms = m.arch.normsPerLayer * normParams(m, h);
  const denseMlp = mlpParams(m, m.intermediate);
  const denseLayer = attention + denseMlp + norms;
  let largest = Math.max(m.vocab * h, h * m.intermediate);
  if (m.arch.fusedQkv) largest = Math.max(largest, h * (m.heads + 2 * m.kvHeads) * m.headDim);
  let moeLayer = 0;
  let expert = 0;
  let moeLayers = 0;
  let activeMlp = denseMlp;
  if (m.moe) {
    const e = m.moe;
    expert = mlpParams(m, e.expertIntermediate);
    const router = h * e.experts + (e.routerBias ? e.experts : 0);
    const shared = e.sharedExperts > 0 ? mlpParams(m, e.sharedExperts * e.expertIntermediate) + (e.sharedExpertGate ? h : 0) : 0;
    moeLayer = attention + norms + e.experts * expert + shared + router;
    moeLayers = m.layers - e.denseLayers;
    activeMlp = e.expertsPerToken * expert + shared + router;
  }
  const denseLayers = m.layers - moeLayers;
  const embedding = m.vocab * h + (m.positionEmbeddings ? (m.maxPositions ?? 0) * h : 0);
  const lmHead = m.tiedEmbeddings ? 0 : m.vocab * h + (m.arch.lmHeadBias ? m.vocab : 0);
  const finalNorm = normParams(m, h);
  const extra = m.arch.extraParams;
  const ends = embedding + lmHead + finalNorm;
  const total = ends + denseLayers * denseLayer + moeLayers * moeLayer + extra;
  const activePerToken = ends + denseLayers * denseLayer + moeLayers * (attention + norms + activeMlp);
  return {
    embedding,
    lmHead,
    finalNorm,
    denseLayer,
    moeLayer,
    denseLayers,
    moeLayers,
    attention,
    expert,
    extra,
    total,
    activePerToken,
    largestTensor: largest,
  };
}

/** KV-cache bytes per token per layer (keys and values, or MLA's compressed latent and its RoPE key). */
export function kvBytesPerTokenPerLayer(m: ModelConfig, bytesPerValue: number): number {
  if (m.mla) return (m.mla.kvLoraRank + m.mla.qkRopeHeadDim) * bytesPerValue;
  return 2 * m.kvHeads * m.headDim * bytesPerValue;
}

/**
 * Token-layers a cache holds for `tokens` tokens of one sequence: every layer keeps every token, except that a
 * sliding-window layer keeps at most its window when the cache honours windows (Hugging Face's sliding and hybrid
 * caches, vLLM V1); a cache that does not keeps them all.
 */
export function cachedTokenLayers(m: ModelConfig, tokens: number, layers: number, honourWindow: boolean): number {
  if (!honourWindow || !m.slidingWindow || m.slidingLayers === 0) return tokens * layers;
  const sliding = Math.round((m.slidingLayers * layers) / m.layers);
  return (layers - sliding) * tokens + sliding * Math.min(tokens, m.slidingWindow);
}
