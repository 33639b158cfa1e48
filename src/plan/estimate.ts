/**
 * The memory estimates behind `gpumem plan`, for the most-loaded GPU: training from the step program
 * (program/train-step.ts: the blocks tensor by tensor, the loss, the optimizer step, walked for the allocated peak and
 * replayed through PyTorch's caching allocator for the reserved peak; docs/plan-training.md), inference through
 * Hugging Face generate (infer.ts), serving engines by release (serve.ts).
 */
import { catalogueGpu } from '../catalogue/gpus.js';
import type { ModelConfig } from './model-config.js';
import { serveEstimate } from './serve.js';
import { estimateInfer } from './infer.js';
import type { Estimate, PlanOptions } from './options.js';
import { estimateTrain } from './train.js';

export * from './options.js';
export { modelStateBytes, weightBytes, kvBytes } from './model-states.js';
export { korthikantiLayerBytes } from './frameworks/megatron.js';
export { adapterParams, adaptedModules, linearModules } from './adapters.js';
export { estimateTrain } from './train.js';
export { estimateInfer } from './infer.js';

/** The GPU an estimate is made for: its capacity (the allocator replay and the serving engines need it) and name. */
export interface EstimateDevice {
  name: string;
  capacityBytes: number;
  /** GPUs joined by NVLink (a serving engine's collectives take more memory there); default true. */
  nvlink?: boolean;
}

/** The GPU a plan is made for when none is named: the CLI's default. */
export const DEFAULT_DEVICE = (): EstimateDevice => {
  const g = catalogueGpu('h200');
  return { name: g.name, capacityBytes: g.memoryBytes, nvlink: true };
};

/**
 * The estimate for the most-loaded GPU of `device` (default: the CLI's, an H200): training and Hugging Face generate
 * from their programs, vLLM and SGLang from their release's start-up accounting (the figures `plan()` gives).
 * @throws InvalidArgumentError for layouts that do not divide the model, releases gpumem does not follow
 */
export function estimate(m: ModelConfig, o: PlanOptions, device: EstimateDevice = DEFAULT_DEVICE()): Estimate {
  if (o.mode === 'train') return estimateTrain(m, o, device.capacityBytes);
  if (o.engine !== 'hf') return serveEstimate(m, o, o.engine, device);
  return estimateInfer(m, o, device.capacityBytes);
}
