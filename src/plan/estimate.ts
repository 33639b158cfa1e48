/**
 * The memory estimates behind `gpumem plan`, for the most-loaded GPU.
 *
 * Training, framework "pytorch" (PyTorch eager, Hugging Face models, as measured on an H200):
 * - weights, gradients and optimizer states by precision (fp32 and amp-bf16 keep fp32 weights and gradients;
 *   bf16 and fp8 keep 16-bit weights and gradients with fp32 master weights and Adam states: ZeRO's K = 12);
 *   ZeRO stage 1/2/3 shards optimizer, then gradients, then parameters over the data-parallel GPUs.
 * - activations per layer and token counted tensor by tensor for the block (LayerNorm + GELU-tanh + dropout for
 *   GPT, RMSNorm + SwiGLU + RoPE + repeated KV heads for Llama) at the element sizes autocast uses, times a factor
 *   fit on measured GPT-2 runs for what the count misses (PyTorch's contiguous copies and temporaries): 1.045 for
 *   fp32, 1.145 for 16-bit; runs of other models test it. Framework choices enter explicitly: a fused attention kernel (flash / memory-efficient SDPA)
 *   stores no s x s matrix, the math kernel stores the softmax; the loss keeps fp32 log-probabilities (4 bytes x
 *   vocabulary per token, as Hugging Face upcasts logits before cross-entropy) and the backward pass briefly holds
 *   two more such tensors; autocast caches a bf16 copy of every matmul weight; AdamW's default foreach step needs
 *   a parameter-sized temporary (fused: none).
 * - the peak is the larger of two moments of a step: the start of the backward pass (activations held,
 *   gradients not yet) and the optimizer step (gradients held, activations freed).
 * Framework "megatron", as Megatron-LM runs: bf16 parameters, fp32 main gradients, fp32 master weights and Adam
 * states (sharded by the distributed optimizer, --zero 1), no autocast cache, fused Adam; activations by Korthikanti
 * et al. 2022, sbh(34 + 5as/h) per layer with its tensor-parallel, sequence-parallel and recomputation forms.
 *
 * Inference: weights by their format, the KV cache (keys and values per layer and token, or MLA's latent; a
 * sliding window caps it; paged blocks round it up), and the prefill workspace.
 */
import type { ModelConfig } from './model-config.js';
import { estimateInfer } from './infer.js';
import type { Estimate, PlanOptions } from './options.js';
import { estimateTrain } from './train.js';

export * from './options.js';
export { bytesPerParam, modelStateBytes, weightBytes, kvBytes } from './model-states.js';
export { savedBytesPerToken, pytorchCorrection, korthikantiLayerBytes } from './activations.js';
export { adapterParams, adaptedModules, linearModules } from './adapters.js';
export { estimateTrain } from './train.js';
export { estimateInfer } from './infer.js';

/** The estimate for the most-loaded GPU. */
export function estimate(m: ModelConfig, o: PlanOptions): Estimate {
  return o.mode === 'train' ? estimateTrain(m, o) : estimateInfer(m, o);
}
