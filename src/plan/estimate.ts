/**
 * The memory estimates behind `gpumem plan`, for the most-loaded GPU: training from the step program
 * (program/train-step.ts: the blocks tensor by tensor, the loss, the optimizer step, walked for the allocated peak and
 * replayed through PyTorch's caching allocator for the reserved peak; docs/plan-training.md), inference through
 * Hugging Face generate (infer.ts), serving engines by release (serve.ts).
 */
import type { ModelConfig } from './model-config.js';
import { estimateInfer } from './infer.js';
import type { Estimate, PlanOptions } from './options.js';
import { estimateTrain } from './train.js';

export * from './options.js';
export { modelStateBytes, weightBytes, kvBytes } from './model-states.js';
export { korthikantiLayerBytes } from './frameworks/megatron.js';
export { adapterParams, adaptedModules, linearModules } from './adapters.js';
export { estimateTrain } from './train.js';
export { estimateInfer } from './infer.js';

/** The estimate for the most-loaded GPU. */
export function estimate(m: ModelConfig, o: PlanOptions): Estimate {
  return o.mode === 'train' ? estimateTrain(m, o) : estimateInfer(m, o);
}
