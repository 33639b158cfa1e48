/**
 * How vLLM sizes its KV cache at start-up, release by release (vllm/worker/worker.py for V0, before 0.8;
 * vllm/v1/worker/gpu_worker.py and vllm/utils/mem_utils.py for V1, the default since 0.8):
 *
 *   budget = total GPU memory x gpu_memory_utilization
 *   KV cache = budget - weights - the activation peak of a profiling run - the memory outside PyTorch it counts
 *              (- CUDA graphs, from 0.21, which estimates them before sizing the cache)
 *
 * What each release counts outside PyTorch differs (outsideTorch below): the CUDA context and NCCL's buffers are in
 * the budget in early releases (1.79 GiB at TP1 and 3.58 GiB at TP2 for Llama-3-8B on an H100,
 * vllm-project/vllm#10511) and outside it in later ones. CUDA graphs are captured after the
 * cache is allocated, outside the budget, until 0.21 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default);
 * --enforce-eager captures none.
 */
import type { EngineVersion } from './engine-versions.js';
import { atLeast } from './engine-versions.js';
import type { ModelConfig } from './model-config.js';
import type { InferOptions, Line } from './options.js';

const GiB = 2 ** 30;

/** What a vLLM release holds at start-up, in and outside its budget. */
export interface EngineMemory {
  fraction: number;
  fractionSource: string;
  budgetBytes: number;
  /** Lines inside the budget before the KV cache (weights, profiling peak, memory outside PyTorch, graphs from 0.21). */
  inside: Line[];
  /** Lines outside the budget (the CUDA context from 0.7/0.10, graphs before 0.21). */
  outside: Line[];
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  /** Whether its cache keeps a sliding-window layer's window only. */
  honoursWindows: boolean;
  estimated: string[];
}

/** vLLM's default gpu_memory_utilization by release (0.92 in current releases; 0.9 before 0.11). */
export function vllmDefaultUtilization(v: EngineVersion): number {
  return atLeast(v, '0.11') ? 0.92 : 0.9;
}

/**
 * vLLM's scheduler defaults for `vllm serve`: V1 gives GPUs of 70 GiB or more (A100s excepted) 8192 batched tokens and
 * 1024 sequences, others 2048 and 256 (arg_utils.py); V0 schedules 256 sequences and, without chunked prefill (the
 * default up to 32K context), max(max_model_len, 2048) tokens.
 */
export function vllmSchedulerDefaults(v: EngineVersion, capacityBytes: number, gpuName: string, maxModelLen: number): { tokens: number; seqs: number } {
  if (!atLeast(v, '0.8')) return { tokens: maxModelLen > 32768 ? 2048 : Math.max(maxModelLen, 2048), seqs: 256 };
  // 0.8 sampled 1024 dummy requests on any GPU ("warming up sampler with 1024 dummy requests" on RTX 4090s,
  // vllm-project/vllm#15617); the table by GPU came with 0.9
  if (!atLeast(v, '0.9')) return { tokens: 8192, seqs: 1024 };
  const big = capacityBytes >= 70 * GiB && !/a100/i.test(gpuName);
  return big ? { tokens: 8192, seqs: 1024 } : { tokens: 2048, seqs: 256 };
}

/**
 * Fp32 logit-sized tensors the profiling run's sampler holds at once: the dummy requests sample with top-k and top-p,
 * which V0 before 0.7 (and V1's PyTorch sampler) run by sorting the logits (values and int64 indices), a softmax, a
 * cumulative sum, the masked copy, probabilities, log-probabilities and the exponential draws; counted from
 * vllm/model_executor/layers/sampler.py. From 0.7 V0's profile keeps about one (0.19 GiB for 256 sequences of a
 * 152064-token vocabulary, vllm-project/vllm#13061).
 */
function samplerCopies(v: EngineVersion): number {
  return atLeast(v, '0.7') && !atLeast(v, '0.8') ? 1 : 10;
}

/** The CUDA context and what loads with it (cuBLAS, kernels): 1.79 GiB counted at TP1 less the 0.2 GiB later releases count. */
const CONTEXT = 1.59 * GiB;
/** NCCL's buffers and the custom all-reduce's: 3.58 - 1.79 GiB at TP2 on H100s (vllm-project/vllm#10511). */
const NCCL = 1.79 * GiB;
/** What later releases still count outside PyTorch: its growth during the profiling run (0.09-0.35 GiB in logs). */
const GROWTH = 0.2 * GiB;

/**
 * Memory outside PyTorch a release counts in its budget, and what it leaves outside: V0 before 0.7 and V1 before
 * 0.9.2 count the device's whole use less PyTorch's; V0 from 0.7 measures from a baseline taken after the context
 * and NCCL; V1 from 0.9.2 from a snapshot after the context but before NCCL (vllm-project/vllm#19312), and from 0.11
 * after NCCL too (#25359).
 */
function outsideTorch(v: EngineVersion, tp: number): { counted: number; outside: number; note: string } {
  const nccl = tp > 1 ? NCCL : 0;
  const v1 = atLeast(v, '0.8');
  if (!atLeast(v, '0.7') || (v1 && !atLeast(v, '0.9.2')))
    return { counted: CONTEXT + GROWTH + nccl, outside: 0, note: "the device's use less PyTorch's: context, cuBLAS, NCCL (vllm-project/vllm#10511)" };
  if (v1 && !atLeast(v, '0.11'))
    return { counted: GROWTH + nccl, outside: CONTEXT, note: `growth during profiling${nccl ? ' and NCCL, initialised after the snapshot' : ''}` };
  return { counted: GROWTH, outside: CONTEXT + nccl, note: 'growth during profiling only (0.09-0.35 GiB in published logs)' };
}

/** The KV cache budget vLLM `v` gives `m` on a GPU of `capacityBytes`, and what it holds besides. */
export function vllmMemory(
  m: ModelConfig,
  o: InferOptions,
  weightsBytes: number,
  capacityBytes: number,
  gpuName: string,
  v: EngineVersion,
  maxModelLen: number,
): EngineMemory {
  const s = o.serve;
  const tp = o.parallel.tp;
  const fraction = s.memoryFraction ?? vllmDefaultUtilization(v);
  const defaults = vllmSchedulerDefaults(v, capacityBytes, gpuName, maxModelLen);
  const T = s.maxNumBatchedTokens ?? defaults.tokens;
  const S = Math.min(s.maxNumSeqs ?? defaults.seqs, T);
  const e = o.weights === 'fp32' ? 4 : 2;
  // The forward pass over T tokens: the residual stream and a layer's input are whole on every tensor-parallel rank;
  // the projections and the MLP (or the experts' fused-MoE buffers) are split.
  const qkv = (m.heads + 2 * m.kvHeads) * m.headDim;
  const mlp = m.moe ? m.moe.expertsPerToken * (3 * m.moe.expertIntermediate + m.hidden * tp) : 3 * m.intermediate;
  const forward = T * e * (2 * m.hidden + Math.max(qkv, mlp) / tp);
  // The sampler over S requests' logits, gathered to the whole vocabulary on every rank: it does not shrink with TP
  const sampler = samplerCopies(v) * S * m.vocab * 4;
  const activation = Math.max(forward, sampler);
  const nonTorch = outsideTorch(v, tp);
  const graphs = s.enforceEager ? 0 : 0.6 * GiB;
  const graphsInside = atLeast(v, '0.21');
  const inside: Line[] = [
    { name: `weights (${o.weights})`, bytes: weightsBytes, note: 'exact for the model shape ("Model loading took ... GiB")', field: 'parametersBytes' },
    {
      name: 'profiling run: activation peak',
      bytes: activation,
      note: `the larger of ${T} batched tokens through one layer (max_num_batched_tokens) and the sampler's ${samplerCopies(v)} fp32 logit-sized tensors for ${S} requests: estimated`,
      field: 'activationsBytes',
    },
    { name: 'memory outside PyTorch (counted)', bytes: nonTorch.counted, note: `${nonTorch.note}: estimated`, field: 'overheadBytes' },
  ];
  const outside: Line[] = [];
  if (nonTorch.outside > 0)
    outside.push({
      name: 'CUDA context and NCCL (outside the budget)',
      bytes: nonTorch.outside,
      note: `vLLM ${v.text} measures from a snapshot taken after them: estimated (NCCL's grows with the GPUs it talks to)`,
      field: 'overheadBytes',
    });
  if (graphs > 0)
    (graphsInside ? inside : outside).push({
      name: `CUDA graphs${graphsInside ? '' : ' (outside the budget)'}`,
      bytes: graphs,
      note: graphsInside
        ? 'estimated by vLLM before sizing the cache (from 0.21; "Estimated CUDA graph memory"): estimated here'
        : 'captured after the cache ("Graph capturing finished ... took X GiB"): estimated; --enforce-eager captures none',
      field: 'overheadBytes',
    });
  const estimated = ['the profiling run activation peak', 'memory outside PyTorch'];
  if (graphs > 0) estimated.push('CUDA graphs');
  return {
    fraction,
    fractionSource: s.memoryFraction !== undefined ? 'given' : `vLLM ${v.text}'s default gpu_memory_utilization (${fraction}; 0.92 from 0.11, 0.9 before)`,
    budgetBytes: capacityBytes * fraction,
    inside,
    outside,
    maxNumBatchedTokens: T,
    maxNumSeqs: S,
    // V1's hybrid KV cache manager (0.10 on) gives sliding-window layers their window; V0 honours a window only when
    // every layer has it (Mistral) and turns interleaved windows off (Gemma 2)
    honoursWindows: atLeast(v, '0.10') || m.slidingLayers === m.layers,
    estimated,
  };
}
