/**
 * The planner's tests' base runs, written out once: one GPU, training at batch 1 and 2048 tokens, or serving 512
 * prompt tokens and 512 new ones at batch 1, each with a flat 5% fragmentation allowance (so a figure does not move
 * with the allocator replay). The values are fixed here, not read from the planner's defaults, because tests assert
 * figures at exactly these sizes; plan.test.ts checks that they are the stock run the planner's defaults describe.
 */
import type { InferOptions, Parallelism, TrainOptions } from '../plan/options.js';

/** One GPU on one node: no ZeRO, no tensor, sequence, pipeline or expert parallelism. */
export const ONE_GPU: Readonly<Parallelism> = Object.freeze({ gpus: 1, nodes: 1, zero: 0, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 });

/** `tp` GPUs of one node, all tensor-parallel. */
export const tensorParallel = (tp: number): Parallelism => ({ ...ONE_GPU, gpus: tp, tp });

/** Serving settings that set nothing an engine would choose, with Hugging Face's batching limits. */
export const NO_SERVE: InferOptions['serve'] = Object.freeze({
  memoryFraction: undefined,
  maxModelLen: undefined,
  blockSize: undefined,
  maxNumBatchedTokens: 8192,
  maxNumSeqs: 256,
});

/**
 * Training on one GPU (mixed bf16, AdamW, PyTorch, SDPA, no recomputation or offload), changed by `over`; the strategy,
 * unless given, as the CLI picks it: Megatron's own, FSDP2 at ZeRO stage 3, DeepSpeed's ZeRO below, else DDP.
 */
export function trainOptions(over: Partial<TrainOptions> = {}): TrainOptions {
  const zero = over.parallel?.zero ?? 0;
  const sharding = over.sharding ?? (over.framework === 'megatron' ? 'megatron' : zero === 3 ? 'fsdp2' : zero > 0 ? 'deepspeed' : 'ddp');
  return {
    mode: 'train',
    precision: 'amp-bf16',
    optimizer: 'adamw',
    fusedOptimizer: false,
    batch: 1,
    seq: 2048,
    gradAccum: 1,
    recompute: 'none',
    attention: 'sdpa',
    framework: 'pytorch',
    parallel: { ...ONE_GPU },
    offload: 'none',
    fragmentation: 0.05,
    ...over,
    sharding,
  };
}

/** Serving on one GPU through Hugging Face generate (bf16 weights and KV cache, SDPA), changed by `over`. */
export function inferOptions(over: Partial<InferOptions> = {}): InferOptions {
  return {
    mode: 'infer',
    batch: 1,
    prompt: 512,
    newTokens: 512,
    kvDtype: 'bf16',
    blockSize: undefined,
    weights: 'bf16',
    attention: 'sdpa',
    engine: 'hf',
    serve: { ...NO_SERVE },
    parallel: { ...ONE_GPU },
    fragmentation: 0.05,
    ...over,
  };
}
