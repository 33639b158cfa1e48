/** Model states: bytes per parameter of weights, gradients and optimizer states, ZeRO sharding, and which parameters a GPU holds. */
import type { ModelConfig } from './model-config.js';
import type { KvDtype, OptimizerName, Parallelism, Precision, WeightFormat } from './options.js';
import type { ParamCounts } from './params.js';

/** True for the precisions that keep every model state in bf16 (no fp32 copy). */
export const pureBf16 = (precision: Precision): boolean => precision === 'bf16-pure' || precision === 'fp8-torchao';

/**
 * Bytes per parameter of one optimizer's states, for parameters of `paramBytes` bytes: torch's Adam and AdamW
 * keep two states in the parameter's dtype (zeros_like), SGD with momentum one; 8-bit AdamW two 1-byte states
 * and an fp32 absmax per 2048-value block of each (bitsandbytes' blockwise quantisation).
 */
export function optimizerStateBytes(optimizer: OptimizerName, paramBytes: number): number {
  if (optimizer === 'adamw8bit' || optimizer === 'paged-adamw8bit') return 2 + (2 * 4) / 2048;
  return (optimizer === 'sgd' ? 1 : 2) * paramBytes;
}

/** True for bitsandbytes' paged optimizers: their states live in CUDA managed memory, outside PyTorch's allocator. */
export const pagedOptimizer = (optimizer: OptimizerName): boolean => optimizer.startsWith('paged-');

/** Bytes per parameter of weights, gradients and optimizer state (master weights included) by precision. */
export function bytesPerParam(precision: Precision, optimizer: OptimizerName): { weights: number; grads: number; optimizer: number; master: number } {
  const fp32Weights = precision === 'fp32' || precision === 'amp-bf16';
  const pure = pureBf16(precision);
  const weights = fp32Weights ? 4 : precision === 'fp8' ? 3 : 2; // fp8: bf16 weights plus fp8 copies for the matmuls
  const grads = fp32Weights ? 4 : 2;
  const master = fp32Weights || pure ? 0 : 4;
  // Adam's states follow the weights they update: fp32 (the master copy, or fp32 weights), or bf16 with the parameters
  return { weights, grads, optimizer: optimizerStateBytes(optimizer, pure ? 2 : 4) + master, master };
}

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
  const b = bytesPerParam(precision, optimizer);
  return {
    parameters: (params * b.weights) / (zero >= 3 ? dp : 1),
    gradients: (params * b.grads) / (zero >= 2 ? dp : 1),
    optimizer: (params * b.optimizer) / (zero >= 1 ? dp : 1),
  };
}

/** Bytes per weight for inference formats (int8 / int4 include per-group scales: one 2-byte scale per 128 / 64). */
export function weightBytes(format: WeightFormat): number {
  return { fp32: 4, bf16: 2, fp16: 2, fp8: 1, int8: 1 + 2 / 128, int4: 0.5 + 2 / 64 }[format];
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

/** True when the most-loaded GPU holds the output layer (and so the loss). */
export function isLastStageOf(c: ParamCounts, p: Parallelism): boolean {
  return p.pp === 1 || c.lmHead + c.finalNorm >= c.embedding;
}
