/** Parameter counts of a transformer, per part, from its shape. */
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
  total: number;
  /** Parameters a token uses (MoE: only its experts). */
  activePerToken: number;
  /** Largest single tensor (optimizer temporaries scale with it). */
  largestTensor: number;
}

export function countParams(m: ModelConfig): ParamCounts {
  const h = m.hidden;
  const H = m.heads;
  const d = m.headDim;
  let attention: number;
  let largest = m.vocab * h;
  if (m.mla) {
    const a = m.mla;
    const qk = a.qkNopeHeadDim + a.qkRopeHeadDim;
    const q = a.qLoraRank ? h * a.qLoraRank + a.qLoraRank + a.qLoraRank * H * qk : h * H * qk;
    const kv = h * (a.kvLoraRank + a.qkRopeHeadDim) + a.kvLoraRank + a.kvLoraRank * H * (a.qkNopeHeadDim + a.vHeadDim);
    attention = q + kv + H * a.vHeadDim * h;
  } else {
    const q = h * H * d;
    const kv = 2 * h * m.kvHeads * d;
    const o = H * d * h;
    const qkvBias = m.bias === 'none' ? 0 : H * d + 2 * m.kvHeads * d;
    const oBias = m.bias === 'all' ? h : 0;
    attention = q + kv + o + qkvBias + oBias;
    if (m.bias === 'all' && m.family === 'gpt') largest = Math.max(largest, h * 3 * h);
  }
  const norms = 2 * (m.norm === 'layernorm' ? 2 * h : h);
  const f = m.intermediate;
  const denseMlp = m.gatedMlp ? 3 * h * f : 2 * h * f + (m.bias === 'all' ? f + h : 0);
  largest = Math.max(largest, h * f);
  const denseLayer = attention + denseMlp + norms;
  let moeLayer = 0;
  let expert = 0;
  let moeLayers = 0;
  let activeMlp = denseMlp;
  if (m.moe) {
    const e = m.moe;
    expert = 3 * h * e.expertIntermediate;
    const router = h * e.experts + (m.mla ? e.experts : 0);
    moeLayer = attention + norms + e.experts * expert + e.sharedExperts * expert + router;
    moeLayers = m.layers - e.denseLayers;
    activeMlp = (e.expertsPerToken + e.sharedExperts) * expert + router;
  }
  const denseLayers = m.layers - moeLayers;
  const embedding = m.vocab * h + (m.positionEmbeddings ? (m.maxPositions ?? 0) * h : 0);
  const lmHead = m.tiedEmbeddings ? 0 : m.vocab * h;
  const finalNorm = m.norm === 'layernorm' ? 2 * h : h;
  const total = embedding + lmHead + finalNorm + denseLayers * denseLayer + moeLayers * moeLayer;
  const activePerToken = embedding + lmHead + finalNorm + denseLayers * denseLayer + moeLayers * (attention + norms + activeMlp);
  return { embedding, lmHead, finalNorm, denseLayer, moeLayer, denseLayers, moeLayers, attention, expert, total, activePerToken, largestTensor: largest };
}

/** KV-cache bytes per token per layer (keys and values, or MLA's compressed latent). */
export function kvBytesPerTokenPerLayer(m: ModelConfig, bytesPerValue: number): number {
  if (m.mla) return (m.mla.kvLoraRank + m.mla.qkRopeHeadDim) * bytesPerValue;
  return 2 * m.kvHeads * m.headDim * bytesPerValue;
}
