/**
 * How vLLM sizes its KV cache at start-up, by the release's row (vllm-releases.ts):
 *
 *   budget = total GPU memory x gpu_memory_utilization
 *   KV cache = budget - weights - the profiling run's activation peak - what the release counts outside PyTorch
 *              (- CUDA graphs where the release estimates them before sizing)
 *
 * The profiling run is one forward pass over max_num_batched_tokens and the sampler's warm-up over max_num_seqs
 * requests; its peak is the larger. The weights and the KV bytes per token are exact for the model's shape; the
 * activation peak, the memory outside PyTorch and the graphs are estimates (the engine measures and prints them).
 */
import { cudaContextFor } from '../../catalogue/gpus.js';
import type { ModelConfig } from '../model-config.js';
import type { InferOptions, Line } from '../options.js';
import type { EngineMemory, EngineRequest, ServingEngine } from './types.js';
import { releaseRow } from './versions.js';
import { type Scheduler, VLLM_RELEASES, type VllmRelease } from './vllm-releases.js';

const GiB = 2 ** 30;

/**
 * Fixed figures of vLLM's start-up, each from a published start-up (the engine measures them and prints them:
 * "non_torch_memory", "Graph capturing finished ... took X GiB"). The CUDA context is not among them: it is the
 * GPU's, from the catalogue (cudaContextFor), and which release counts it is the release's row (nonTorch).
 */
export const VLLM_CONSTANTS = {
  /**
   * What appears outside PyTorch after the context at TP 1, while loading and profiling: kernel modules loaded
   * lazily on first launch (torch's, cuBLAS/cuBLASLt's, the attention backend's, vLLM's _C), the BLAS handles' state.
   * (cuBLAS's workspaces come from PyTorch's allocator and count as PyTorch's.)
   */
  growthBytes: {
    value: 0.16 * GiB,
    source:
      'vllm-project/vllm#12126: "non_torch_memory takes 0.16GiB" at TP 1 on an H100, measured from a snapshot taken after the context (vllm/utils.py MemorySnapshot)',
  },
  /**
   * NCCL's and the custom all-reduce's buffers at TP 2 or more between GPUs joined by NVLink: vLLM's PyNccl
   * communicator and torch's ProcessGroupNCCL each set up their channels, and the custom all-reduce its IPC buffers.
   */
  ncclBytes: { value: 1.79 * GiB, source: 'vllm-project/vllm#10511: 3.58 - 1.79 GiB non-torch at TP 2 and TP 1 on H100s, the same code and model' },
  /** The same over PCIe, where vLLM's custom all-reduce is off (it needs peer access) and NCCL's buffers are small. */
  ncclPcieBytes: { value: 0.25 * GiB - 0.16 * GiB, source: 'vllm-project/vllm#13061: 0.25 GiB non-torch at TP 2 on RTX 4090s (0.7) less the growth above' },
  /** CUDA graphs of the default capture sizes. */
  graphsBytes: { value: 0.6 * GiB, source: 'estimate: "Graph capturing finished ... took 0.5-0.7 GiB" in published start-up logs' },
  /** SMs the Triton sampler's cached buffer is sized by (an H100's). */
  samplerBufferRows: { value: 132, source: 'topk_topp_triton.py: min(next_pow2(min(#SM, N)), #SM) rows; 132 SMs on an H100' },
};

/** vLLM's default gpu_memory_utilization for a release. */
export const vllmDefaultUtilization = (row: VllmRelease): number => row.utilization;

/** The scheduler's max_num_batched_tokens and max_num_seqs for `vllm serve`. */
export function schedulerDefaults(s: Scheduler, capacityBytes: number, gpuName: string, maxModelLen: number): { tokens: number; seqs: number } {
  if (s.kind === 'v0') return { tokens: maxModelLen > 32768 ? s.chunk : Math.max(maxModelLen, 2048), seqs: 256 };
  if (s.kind === 'v1-name') return { tokens: /h100|h200/i.test(gpuName) ? 8192 : 2048, seqs: 1024 };
  if (s.b200Tier && capacityBytes >= 160 * GiB) return { tokens: 16384, seqs: 1024 };
  const big = capacityBytes >= 70 * GiB && !(s.excludeA100 && /a100/i.test(gpuName));
  return big ? { tokens: 8192, seqs: 1024 } : { tokens: 2048, seqs: 256 };
}

/** Whether Model Runner V2 runs the model in this release (dense models it is the default for). */
const usesV2 = (row: VllmRelease, m: ModelConfig): boolean => !m.moe && (row.v2Dense === 'all' || row.v2Dense.includes(m.modelType));

/** The profiling run's peak: one forward pass over T tokens, or the sampler's warm-up over S requests. */
function profilePeak(m: ModelConfig, o: InferOptions, row: VllmRelease, T: number, S: number): { bytes: number; note: string } {
  const tp = o.parallel.tp;
  const e = o.weights === 'fp32' ? 4 : 2;
  // the residual stream and a layer's input are whole on every rank; the projections and the MLP (or the experts'
  // fused-MoE buffers) split
  const qkv = (m.heads + 2 * m.kvHeads) * m.headDim;
  const mlp = m.moe ? m.moe.expertsPerToken * (3 * m.moe.expertIntermediate + m.hidden * tp) : 3 * m.intermediate;
  const forward = T * e * (2 * m.hidden + Math.max(qkv, mlp) / tp);
  // the sampler over S requests' logits, gathered to the whole vocabulary (V1: on every rank; V0: the driver's, whose
  // block count the engine takes)
  const copies = usesV2(row, m) ? 0.5 : row.sampler.copies;
  const buffer = row.sampler.tritonBuffer && !usesV2(row, m) && S >= 8 ? Math.min(S, VLLM_CONSTANTS.samplerBufferRows.value) * m.vocab * 4 : 0;
  const sampler = copies * S * m.vocab * 4 + buffer;
  return {
    bytes: Math.max(forward, sampler),
    note: `the larger of ${T} batched tokens through one layer (max_num_batched_tokens) and the sampler's warm-up for ${S} requests (${copies} fp32 vocabulary-sized copies each${buffer ? ", and the Triton kernel's cached buffer" : ''}): estimated`,
  };
}

/**
 * What the release counts outside PyTorch inside its budget, and what lies outside it, from the quantities that
 * physically live outside PyTorch: the CUDA context (the GPU's, from the catalogue), what loads after it (growth),
 * and NCCL's buffers at TP 2 or more. Which of them the release counts is its baseline (vllm-releases.ts): the
 * device's whole use (the context in), or a snapshot taken after torch.cuda.mem_get_info has created the context
 * (vllm-project/vllm#12059: the context is then in the baseline, outside the budget).
 */
function outsideTorch(row: VllmRelease, tp: number, nvlink: boolean, gpuName: string): { counted: number; outside: number; note: string; context: string } {
  const c = VLLM_CONSTANTS;
  const nccl = tp > 1 ? (nvlink ? c.ncclBytes.value : c.ncclPcieBytes.value) : 0;
  const context = cudaContextFor(gpuName);
  const contextNote = `${context.source}${context.assumed ? ' (assumed)' : ''}`;
  const growth = c.growthBytes.value;
  switch (row.nonTorch) {
    case 'whole-device':
      return {
        counted: context.bytes + growth + nccl,
        outside: 0,
        note: `the device's use less PyTorch's: the CUDA context (${contextNote}), modules loaded since${nccl ? ', NCCL' : ''}`,
        context: contextNote,
      };
    case 'before-nccl':
      return {
        counted: growth + nccl,
        outside: context.bytes,
        note: `growth during loading and profiling${nccl ? " and NCCL's buffers, initialised after the baseline" : ''}`,
        context: contextNote,
      };
    case 'after-nccl':
      // NCCL's connections and buffers for large all-reduces are set up lazily, in the profiling pass's first ones
      return {
        counted: growth + nccl,
        outside: context.bytes,
        note: `growth during profiling${nccl ? ", NCCL's buffers for large all-reduces among it" : ''}`,
        context: contextNote,
      };
  }
}

/** The longest request: the model's, or Gemma 2's window where the release turns its interleaved windows off. */
function maxLen(row: VllmRelease, m: ModelConfig, asked: number, given: boolean): number {
  if (row.windows === 'gemma2-capped' && m.modelType === 'gemma2' && m.slidingWindow && !given) return Math.min(asked, m.slidingWindow);
  return asked;
}

/** The KV cache budget vLLM gives a model, and what it holds besides. */
function vllmMemory(r: EngineRequest): EngineMemory {
  const { m, o, capacityBytes, gpuName } = r;
  const row = releaseRow(VLLM_RELEASES, r.version);
  const s = o.serve;
  const fraction = s.memoryFraction ?? row.utilization;
  const maxModelLen = maxLen(row, m, r.maxModelLen, s.maxModelLen !== undefined);
  const defaults = schedulerDefaults(row.scheduler, capacityBytes, gpuName, maxModelLen);
  const T = s.maxNumBatchedTokens ?? defaults.tokens;
  const S = Math.min(s.maxNumSeqs ?? defaults.seqs, T);
  const peak = profilePeak(m, o, row, T, S);
  const nonTorch = outsideTorch(row, o.parallel.tp, r.nvlink, gpuName);
  const graphs = s.enforceEager ? 0 : VLLM_CONSTANTS.graphsBytes.value;
  const graphsInside = row.graphs === 'inside' && !usesV2(row, m);
  const inside: Line[] = [
    { name: `weights (${o.weights})`, bytes: r.weightsBytes, note: 'exact for the model shape ("Model loading took ... GiB")', field: 'parametersBytes' },
    { name: 'profiling run: activation peak', bytes: peak.bytes, note: peak.note, field: 'activationsBytes' },
    { name: 'memory outside PyTorch (counted)', bytes: nonTorch.counted, note: `${nonTorch.note}: estimated`, field: 'overheadBytes' },
  ];
  const outside: Line[] = [];
  if (nonTorch.outside > 0)
    outside.push({
      name: 'CUDA context (outside the budget)',
      bytes: nonTorch.outside,
      note: `vLLM ${r.version.text} measures from a baseline taken after it: ${nonTorch.context}`,
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
  return {
    fraction,
    fractionSource: s.memoryFraction !== undefined ? 'given' : `vLLM ${r.version.text}'s default gpu_memory_utilization (${fraction})`,
    budgetBytes: capacityBytes * fraction,
    inside,
    outside,
    maxNumBatchedTokens: T,
    maxNumSeqs: S,
    honoursWindows: row.windows === 'per-layer' || m.slidingLayers === m.layers,
    maxModelLen,
    printedTokens: row.printedTokens,
    estimated: ['the profiling run activation peak', 'memory outside PyTorch', ...(graphs > 0 ? ['CUDA graphs'] : [])],
  };
}

export const vllm: ServingEngine = { name: 'vllm', label: 'vLLM', oldest: '0.6', newest: '0.28', blockSize: 16, memory: vllmMemory };
