/** The single changes `gpumem plan` tries when a plan does not fit, cheapest first, each with its cost in plain words. */
import { fusedAttention, type InferOptions, type PlanOptions, type TrainOptions } from './estimate.js';
import { frameworkOf } from './frameworks/registry.js';
import type { ModelConfig } from './model-config.js';

export type Variant = { change: string; cost: string; apply: (o: PlanOptions) => PlanOptions | undefined };

/** The changes worth trying for `o`. */
export function variants(m: ModelConfig, o: PlanOptions): Variant[] {
  const v: Variant[] = [];
  const par = o.parallel;
  if (o.mode === 'train') {
    const t = o;
    const deepspeed = t.framework === 'megatron' ? 'megatron' : 'deepspeed';
    if (par.zero < 3)
      v.push({
        change: `ZeRO stage ${par.zero + 1}`,
        cost: 'more communication: shards over the data-parallel GPUs',
        apply: (x) => ({ ...(x as TrainOptions), sharding: deepspeed, parallel: { ...par, zero: (par.zero + 1) as 1 | 2 | 3 } }),
      });
    if (par.zero < 3 && t.framework !== 'megatron')
      v.push({
        change: 'ZeRO stage 3 (FSDP)',
        cost: 'parameters all-gathered per layer in both passes',
        apply: (x) => ({ ...(x as TrainOptions), sharding: frameworkOf(t.framework).fsdp, parallel: { ...par, zero: 3 } }),
      });
    if (t.recompute === 'none')
      v.push({
        change: 'selective recomputation',
        cost: 'recomputes attention in the backward pass (a few % more compute)',
        apply: (x) => ({ ...(x as TrainOptions), recompute: 'selective' }),
      });
    if (t.recompute !== 'full')
      v.push({
        change: 'full recomputation',
        cost: 'one more forward pass per step (about 33% more compute)',
        apply: (x) => ({ ...(x as TrainOptions), recompute: 'full' }),
      });
    if (t.attention !== 'flash' && !fusedAttention(m, t.attention, t.precision))
      v.push({ change: 'a fused (flash) attention kernel', cost: 'none: faster as a rule', apply: (x) => ({ ...(x as TrainOptions), attention: 'flash' }) });
    if (t.precision === 'amp-bf16' || t.precision === 'bf16')
      v.push({
        change: 'pure bf16 (bf16 weights, gradients and optimizer states, no fp32 copy)',
        cost: 'less numerical headroom: AdamW updates in bf16 can stall on small learning rates (Kahan summation or stochastic rounding helps)',
        apply: (x) => ({ ...(x as TrainOptions), precision: 'bf16-pure' }),
      });
    if (t.batch > 1) {
      const half = Math.max(1, Math.floor(t.batch / 2));
      v.push({
        change: `micro-batch ${half} with gradient accumulation x${Math.ceil((t.batch * t.gradAccum) / half / t.gradAccum) * t.gradAccum}`,
        cost: 'same global batch, more steps of smaller matmuls',
        apply: (x) => ({ ...(x as TrainOptions), batch: half, gradAccum: (x as TrainOptions).gradAccum * 2 }),
      });
    }
    if (t.offload === 'none')
      v.push({
        change: 'offload the optimizer to pinned host memory',
        cost: 'gradients and parameters cross the host link every step; the step runs on the CPU',
        apply: (x) => ({ ...(x as TrainOptions), offload: 'optimizer' }),
      });
    if (t.offload !== 'params')
      v.push({
        change: 'offload parameters and optimizer to pinned host memory',
        cost: 'parameters cross the host link in both passes',
        apply: (x) => ({ ...(x as TrainOptions), offload: 'params' }),
      });
    if (t.framework === 'pytorch' && (t.loss ?? 'standard') === 'standard')
      v.push({
        change: 'chunked cross-entropy (--loss chunked)',
        cost: 'none: the loss upcasts one chunk of logits at a time (torchtune, LitGPT)',
        apply: (x) => ({ ...(x as TrainOptions), loss: 'chunked' }),
      });
    if (t.lora && (t.lora.base === 'bf16' || t.lora.base === 'fp16' || t.lora.base === 'fp32'))
      v.push({
        change: 'a 4-bit base (QLoRA: --base-weights nf4)',
        cost: 'dequantisation in every matmul (slower steps), some accuracy loss',
        apply: (x) => ({ ...(x as TrainOptions), lora: { ...t.lora!, base: 'nf4' } }),
      });
    if (t.framework === 'pytorch' && !t.activationOffload)
      v.push({
        change: 'activation offloading to pinned host memory (--activation-offload)',
        cost: 'activations cross the host link twice per step, overlapped with compute',
        apply: (x) => ({ ...(x as TrainOptions), activationOffload: true }),
      });
    if (t.precision === 'fp32')
      v.push({ change: 'bf16 mixed precision (amp-bf16)', cost: 'none on current GPUs', apply: (x) => ({ ...(x as TrainOptions), precision: 'amp-bf16' }) });
  } else {
    const i = o;
    if (i.kvDtype === 'bf16' || i.kvDtype === 'fp16' || i.kvDtype === 'fp32')
      v.push({ change: 'an fp8 KV cache', cost: 'small accuracy loss; halves the cache', apply: (x) => ({ ...(x as InferOptions), kvDtype: 'fp8' }) });
    if (i.weights === 'bf16' || i.weights === 'fp16' || i.weights === 'fp32') {
      v.push({ change: 'int8 weights', cost: 'small accuracy loss; halves the weights', apply: (x) => ({ ...(x as InferOptions), weights: 'int8' }) });
      v.push({ change: 'int4 weights', cost: 'some accuracy loss; a quarter of the weights', apply: (x) => ({ ...(x as InferOptions), weights: 'int4' }) });
    }
    if (i.batch > 1)
      v.push({
        change: `batch ${Math.floor(i.batch / 2)}`,
        cost: 'half the concurrent sequences',
        apply: (x) => ({ ...(x as InferOptions), batch: Math.floor(i.batch / 2) }),
      });
  }
  for (const k of [2, 4, 8]) {
    const gpus = par.gpus * k;
    const tp = o.mode === 'infer' ? Math.min(par.tp * k, m.heads) : par.tp;
    if (o.mode === 'infer' && tp === par.tp) continue;
    v.push({
      change: o.mode === 'train' ? `${gpus} GPUs (data parallel x${k}${par.zero === 0 ? ', ZeRO-3' : ''})` : `${gpus} GPUs (tensor parallel ${tp})`,
      cost: `${k}x the GPUs`,
      apply: (x) =>
        (x.mode === 'train'
          ? {
              ...x,
              sharding: par.zero === 0 && x.framework !== 'megatron' ? frameworkOf(x.framework).fsdp : x.sharding,
              parallel: { ...par, gpus, tp, nodes: par.nodes, zero: par.zero === 0 && x.framework !== 'megatron' ? 3 : par.zero },
            }
          : { ...x, parallel: { ...par, gpus, tp, nodes: par.nodes } }) as PlanOptions,
    });
  }
  return v;
}
