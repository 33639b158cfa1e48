/** Model states as ZeRO counts them, inference formats' bytes per value, and which parameters a GPU holds. */
import type { ModelConfig } from './model-config.js';
import type { KvDtype, OptimizerName, Parallelism, Precision, WeightFormat } from './options.js';
import { stateBytes } from './precision.js';
import { quantScheme } from './quant-schemes.js';
import type { ParamCounts } from './params.js';

/**
 * Model-state bytes (parameters, gradients, optimizer states) of `params` parameters under ZeRO stage `zero` over
 * `dp` data-parallel GPUs, as ZeRO (Rajbhandari et al. 2020) defines them.
 */
export function modelStateBytes(
  params: number,
  precision: Precision,
  optimizer: OptimizerName,
  dp: number,
  zero: number,
): { parameters: number; gradients: number; optimizer: number } {
  const b = stateBytes(precision, optimizer);
  return {
    parameters: (params * b.weights) / (zero >= 3 ? dp : 1),
    gradients: (params * b.grads) / (zero >= 2 ? dp : 1),
    optimizer: (params * b.optimizer) / (zero >= 1 ? dp : 1),
  };
}

/**
 * Bytes per weight of an inference format: its dtype's, or a quantised linear layer's, quantisation state included,
 * for a 4096 x 4096 layer (quant-schemes.ts; a layer's own shape changes the per-row and per-tensor shares a little).
 */
export function weightBytes(format: WeightFormat): number {
  const s = quantScheme(format);
  if (!s) return format === 'fp32' ? 4 : 2;
  const side = 4096;
  return s.linearBytes({ in: side, out: side }, s.groupSize) / (side * side);
}

export function kvBytes(d: KvDtype): number {
  return { fp32: 4, bf16: 2, fp16: 2, fp8: 1, int8: 1, int4: 0.5 }[d];
}

/** Parameters held by the most-loaded GPU before ZeRO shards them: a pipeline stage's layers over TP and EP. */
export function localParams(c: ParamCounts, m: ModelConfig, p: Parallelism): number {
  const perStage = m.layers / p.pp;
  const denseShare = Math.min(c.denseLayers, perStage);
  const moeShare = perStage - denseShare;
  const expertParams = m.moe ? (m.moe.experts * c.expert) / p.ep : 0;
  const moeNonExpert = c.moeLayer - (m.moe ? m.moe.experts * c.expert : 0);
  const layers = (denseShare * c.denseLayer + moeShare * moeNonExpert) / p.tp + (moeShare * expertParams) / p.tp;
  const ends = p.pp === 1 ? c.embedding + c.lmHead + c.finalNorm : Math.max(c.embedding, c.lmHead + c.finalNorm);
  return layers + ends / p.tp;
}
