/**
 * Serving engines size their KV cache themselves: they take a fixed share of the GPU and give the KV cache whatever
 * the weights and their own working memory leave. This follows each engine's documented start-up accounting, and
 * prints the figures they print ("GPU KV cache size: N tokens", "Maximum concurrency for M tokens per request").
 *
 * - vLLM: budget = total memory x gpu_memory_utilization; KV cache = budget - weights - the activation peak of a
 *   profiling forward pass over max_num_batched_tokens tokens - memory used outside PyTorch (context, NCCL) - CUDA
 *   graphs; cut into blocks of block_size tokens.
 * - SGLang: KV cache = total memory x mem_fraction_static - weights - what the process held before loading
 *   (context, NCCL); the rest of the GPU is left for activations and CUDA graphs. Tokens = bytes / cell size.
 * The weights and the KV bytes per token are exact for the model's shape; the activation peak, the memory outside
 * PyTorch and the CUDA graphs are estimates (the engines measure them at start-up and print them).
 */
import type { ModelConfig } from './model-config.js';
import { kvBytes, localParams, weightBytes } from './model-states.js';
import type { InferOptions, Line } from './options.js';
import { countParams, kvBytesPerTokenPerLayer } from './params.js';

export type Engine = 'hf' | 'vllm' | 'sglang';

export interface ServeOptions {
  /** vLLM's gpu_memory_utilization or SGLang's mem_fraction_static; undefined: the engine's default. */
  memoryFraction: number | undefined;
  /** Longest request in tokens (default: the model's positions). */
  maxModelLen: number | undefined;
  /** Tokens per KV block (vLLM: 16; SGLang's page size: 1). */
  blockSize: number | undefined;
  /** vLLM: tokens of the profiling forward pass (max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** vLLM: sequences sampled at once in the profiling pass (max_num_seqs). */
  maxNumSeqs: number;
}

export interface ServeEstimate {
  engine: 'vllm' | 'sglang';
  memoryFraction: number;
  /** Where the fraction came from. */
  memoryFractionSource: string;
  budgetBytes: number;
  kvCacheBytes: number;
  kvBytesPerToken: number;
  kvTokens: number;
  blockSize: number;
  kvBlocks: number;
  maxModelLen: number;
  /** KV tokens over max_model_len: how many requests of full length fit at once. */
  maxConcurrency: number;
  /** The engine starts only when one request of max_model_len fits in the KV cache. */
  starts: boolean;
  lines: Line[];
  estimated: string[];
}

const GiB = 2 ** 30;

/** vLLM's default gpu_memory_utilization (0.92 in current releases; 0.9 before). */
export const VLLM_DEFAULT_UTILIZATION = 0.92;

/** SGLang's default mem_fraction_static by tensor-parallel size (its long-standing table; newer releases also weigh the GPU's memory). */
export function sglangDefaultFraction(tp: number): number {
  return tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
}

/**
 * Weights as a quantised checkpoint stores them: AWQ, GPTQ and fp8 checkpoints quantise the linear layers of the
 * blocks and keep the embeddings and the output layer in 16 bits.
 */
export function servedWeightBytes(m: ModelConfig, o: InferOptions): number {
  const c = countParams(m);
  const P = localParams(c, m, o.parallel);
  const wb = weightBytes(o.weights);
  if (wb >= 2) return P * wb;
  const ends = (o.parallel.pp === 1 ? c.embedding + c.lmHead : Math.max(c.embedding, c.lmHead)) / o.parallel.tp;
  return (P - ends) * wb + ends * 2;
}

/** The KV cache a serving engine gives this model on a GPU of `capacityBytes`. */
export function estimateServe(m: ModelConfig, o: InferOptions, engine: 'vllm' | 'sglang', s: ServeOptions, capacityBytes: number): ServeEstimate {
  const p = o.parallel;
  const layersHere = m.layers / p.pp;
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const kvBytesPerToken = (kvBytesPerTokenPerLayer(m, kvBytes(o.kvDtype)) * layersHere) / kvSplit;
  const weights = servedWeightBytes(m, o);
  const fraction = s.memoryFraction ?? (engine === 'vllm' ? VLLM_DEFAULT_UTILIZATION : sglangDefaultFraction(p.tp));
  const fractionSource =
    s.memoryFraction !== undefined
      ? 'given'
      : engine === 'vllm'
        ? `vLLM's default gpu_memory_utilization (${VLLM_DEFAULT_UTILIZATION}; 0.9 in releases before 0.11)`
        : `SGLang's default mem_fraction_static for tensor parallel ${p.tp}`;
  const budget = capacityBytes * fraction;
  const nonTorch = 0.5 * GiB + (p.gpus > 1 ? 0.25 * GiB : 0);
  const lines: Line[] = [
    {
      name: `weights (${o.weights})`,
      bytes: weights,
      note: 'exact for the model shape; quantised formats keep embeddings and the output layer in 16 bits',
      field: 'parametersBytes',
    },
  ];
  const estimated: string[] = [];
  let kv: number;
  if (engine === 'vllm') {
    // The profiling pass: one layer's buffers for max_num_batched_tokens tokens at a time (hidden states, the fused
    // qkv and gate-up projections, the MLP activation) and fp32 logits for max_num_seqs sampled sequences.
    const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
    const e = o.weights === 'fp32' ? 4 : 2;
    const qkv = (m.heads + 2 * m.kvHeads) * m.headDim;
    const T = s.maxNumBatchedTokens;
    const activation = (T * (3 * m.hidden + Math.max(qkv, 3 * f)) * e) / p.tp + s.maxNumSeqs * m.vocab * 4;
    const graphs = 0.5 * GiB;
    lines.push(
      {
        name: 'profiling pass: activation peak',
        bytes: activation,
        note: `${T} batched tokens (max_num_batched_tokens) through one layer at a time, fp32 logits for ${s.maxNumSeqs} sequences: estimated`,
        field: 'activationsBytes',
      },
      { name: 'memory outside PyTorch', bytes: nonTorch, note: 'CUDA context, cuBLAS workspaces, NCCL: estimated', field: 'overheadBytes' },
      { name: 'CUDA graphs', bytes: graphs, note: 'captured decode graphs: estimated (vLLM prints its own)', field: 'overheadBytes' },
    );
    estimated.push('the profiling pass activation peak', 'memory outside PyTorch', 'CUDA graphs');
    kv = budget - weights - activation - nonTorch - graphs;
  } else {
    lines.push({ name: 'memory held before loading', bytes: nonTorch, note: 'CUDA context, NCCL: estimated', field: 'overheadBytes' });
    estimated.push('memory held before loading (context, NCCL)');
    kv = budget - weights - nonTorch;
  }
  kv = Math.max(0, kv);
  const blockSize = s.blockSize ?? (engine === 'vllm' ? 16 : 1);
  const kvBlocks = Math.floor(kv / (kvBytesPerToken * blockSize));
  const kvTokens = kvBlocks * blockSize;
  const maxModelLen = s.maxModelLen ?? m.maxPositions ?? o.prompt + o.newTokens;
  const kvBytes_ = kvBlocks * blockSize * kvBytesPerToken;
  lines.push({
    name: `KV cache (${o.kvDtype})`,
    bytes: kvBytes_,
    note: `the rest of ${(fraction * 100).toFixed(0)}% of the GPU: ${kvTokens} tokens in ${kvBlocks} blocks of ${blockSize}, ${kvBytesPerToken} bytes per token${m.mla ? ' (MLA latent)' : ''}`,
    field: 'kvCacheBytes',
  });
  return {
    engine,
    memoryFraction: fraction,
    memoryFractionSource: fractionSource,
    budgetBytes: budget,
    kvCacheBytes: kvBytes_,
    kvBytesPerToken,
    kvTokens,
    blockSize,
    kvBlocks,
    maxModelLen,
    maxConcurrency: kvTokens / maxModelLen,
    starts: kvTokens >= maxModelLen,
    lines,
    estimated,
  };
}
