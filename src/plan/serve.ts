/**
 * Serving engines size their KV cache themselves: they take a share of the GPU and give the KV cache whatever the
 * weights and their own working memory leave. This follows each engine's start-up accounting release by release
 * (vllm.ts, sglang.ts) and prints the figures they print ("GPU KV cache size: N tokens", "Maximum concurrency for M
 * tokens per request"). The weights and the KV bytes per token are exact for the model's shape (MLA's latent, sliding
 * windows where the engine honours them); the activation peak, the memory outside PyTorch and the CUDA graphs are
 * estimates (the engines measure them at start-up and print them).
 */
import { ENGINES, parseEngineVersion } from './engines/registry.js';
import type { ModelConfig } from './model-config.js';
import { kvBytes, localParams } from './model-states.js';
import { checkParallel, type Estimate, fieldsOf, type InferOptions, type Line } from './options.js';
import { cachedTokenLayers, countParams, kvBytesPerTokenPerLayer } from './params.js';
import { servedWeights } from './quantised-weights.js';

export type Engine = 'hf' | 'vllm' | 'sglang';

export interface ServeOptions {
  /** vLLM's gpu_memory_utilization or SGLang's mem_fraction_static; undefined: the engine's default. */
  memoryFraction: number | undefined;
  /** Longest request in tokens (default: the model's positions). */
  maxModelLen: number | undefined;
  /** Tokens per KV block (vLLM: 16; SGLang's page size: 1). */
  blockSize: number | undefined;
  /** vLLM: tokens of the profiling forward pass (max_num_batched_tokens); undefined: the release's default. */
  maxNumBatchedTokens?: number | undefined;
  /** vLLM: sequences sampled at once in the profiling pass (max_num_seqs); undefined: the release's default. */
  maxNumSeqs?: number | undefined;
  /** The engine release the plan follows ("0.10", "0.5.4"); undefined: the newest gpumem follows. */
  engineVersion?: string | undefined;
  /** No CUDA graphs (vLLM's --enforce-eager, SGLang's --disable-cuda-graph). */
  enforceEager?: boolean | undefined;
}

export interface ServeEstimate {
  engine: 'vllm' | 'sglang';
  /** The release the figures follow. */
  version: string;
  memoryFraction: number;
  /** Where the fraction came from. */
  memoryFractionSource: string;
  budgetBytes: number;
  kvCacheBytes: number;
  /** KV bytes per token on this GPU, every layer counted (the figure the engines divide by). */
  kvBytesPerToken: number;
  kvTokens: number;
  blockSize: number;
  kvBlocks: number;
  maxModelLen: number;
  /** How many requests of max_model_len the cache holds at once (sliding-window layers keep their window only). */
  maxConcurrency: number;
  /** The engine starts only when one request of max_model_len fits in the KV cache. */
  starts: boolean;
  /** vLLM's profiling run: tokens and sequences (0 for SGLang). */
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  /** The budget's lines, the KV cache, then what the engine holds outside its budget: they add up to the device's use. */
  lines: Line[];
  /** What the device holds once the engine has started: the lines added up. */
  deviceBytes: number;
  estimated: string[];
}

/**
 * Weights as the format stores them (quantised-weights.ts): a quantised format's linear layers in its layout, the
 * embeddings, the output layer and the norms in 16 bits.
 */
export function servedWeightBytes(m: ModelConfig, o: InferOptions): number {
  return servedWeights(m, o).totalBytes;
}

/** The KV cache's line: the rest of the engine's budget, in blocks, and the windows the engine honours. */
function kvCacheLine(
  m: ModelConfig,
  o: InferOptions,
  mem: { fraction: number; honoursWindows: boolean },
  k: { kvCacheBytes: number; kvTokens: number; kvBlocks: number; blockSize: number; kvBytesPerToken: number },
): Line {
  const windows =
    mem.honoursWindows && m.slidingWindow && m.slidingLayers ? `; ${m.slidingLayers} of ${m.layers} layers keep a ${m.slidingWindow}-token window` : '';
  return {
    name: `KV cache (${o.kvDtype})`,
    bytes: k.kvCacheBytes,
    note: `the rest of ${(mem.fraction * 100).toFixed(1)}% of the GPU: ${k.kvTokens} tokens in ${k.kvBlocks} blocks of ${k.blockSize}, ${k.kvBytesPerToken} bytes per token${m.mla ? ' (MLA latent)' : ''}${windows}`,
    field: 'kvCacheBytes',
  };
}

/**
 * The KV cache a serving engine gives this model on a GPU of `capacityBytes` (named `gpuName`: vLLM's defaults
 * depend on it), following the engine release in o.serve.engineVersion.
 * @throws InvalidArgumentError for a release gpumem does not follow.
 */
export function estimateServe(
  m: ModelConfig,
  o: InferOptions,
  engine: 'vllm' | 'sglang',
  s: ServeOptions,
  capacityBytes: number,
  gpuName = '',
  nvlink = true,
): ServeEstimate {
  const v = parseEngineVersion(engine, s.engineVersion);
  const e = ENGINES[engine];
  const p = o.parallel;
  const layersHere = m.layers / p.pp;
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const perLayer = kvBytesPerTokenPerLayer(m, kvBytes(o.kvDtype)) / kvSplit;
  const kvBytesPerToken = perLayer * layersHere;
  const weights = servedWeightBytes(m, o);
  const asked = s.maxModelLen ?? m.maxPositions ?? o.prompt + o.newTokens;
  const mem = e.memory({ m, o: { ...o, serve: s }, weightsBytes: weights, capacityBytes, gpuName, nvlink, version: v, maxModelLen: asked });
  const maxModelLen = mem.maxModelLen;
  const held = mem.inside.reduce((a, l) => a + l.bytes, 0);
  const kv = Math.max(0, mem.budgetBytes - held);
  const blockSize = s.blockSize ?? e.blockSize;
  const kvBlocks = Math.floor(kv / (kvBytesPerToken * blockSize));
  const rounded = Math.ceil(maxModelLen / blockSize) * blockSize;
  // from vLLM 0.21 "GPU KV cache size" is max_concurrency x max_model_len, not blocks x block size
  const kvTokens = mem.printedTokens === 'concurrency' ? Math.floor((kvBlocks * maxModelLen) / (rounded / blockSize)) : kvBlocks * blockSize;
  const kvCacheBytes = kvBlocks * blockSize * kvBytesPerToken;
  // one request of max_model_len: every layer's tokens, a sliding-window layer's window where the engine honours it
  const perRequest = perLayer * cachedTokenLayers(m, rounded, layersHere, mem.honoursWindows);
  const kvLine = kvCacheLine(m, o, mem, { kvCacheBytes, kvTokens, kvBlocks, blockSize, kvBytesPerToken });
  const lines: Line[] = [...mem.inside, kvLine, ...mem.outside];
  return {
    engine,
    version: v.text,
    memoryFraction: mem.fraction,
    memoryFractionSource: mem.fractionSource,
    budgetBytes: mem.budgetBytes,
    kvCacheBytes,
    kvBytesPerToken,
    kvTokens,
    blockSize,
    kvBlocks,
    maxModelLen,
    // vLLM prints tokens / max_model_len; with windows, what one request needs
    maxConcurrency: perRequest < kvBytesPerToken * rounded ? kvCacheBytes / perRequest : (kvBlocks * blockSize) / maxModelLen,
    starts: kvCacheBytes >= perRequest,
    maxNumBatchedTokens: mem.maxNumBatchedTokens,
    maxNumSeqs: mem.maxNumSeqs,
    lines,
    deviceBytes: lines.reduce((a, l) => a + l.bytes, 0),
    estimated: mem.estimated,
  };
}

/**
 * A serving engine's start-up as an estimate: its budget's lines, the KV cache it sizes, and what it holds outside
 * the budget; the device's peak is their sum.
 * @throws InvalidArgumentError for a layout the model does not divide or a release gpumem does not follow
 */
export function serveEstimate(
  m: ModelConfig,
  o: InferOptions,
  engine: 'vllm' | 'sglang',
  device: { name: string; capacityBytes: number; nvlink?: boolean },
): Estimate {
  checkParallel(m, o.parallel);
  const s = estimateServe(m, o, engine, o.serve, device.capacityBytes, device.name, device.nvlink ?? true);
  const lines = s.lines.map((l) => ({ ...l, bytes: Math.round(l.bytes) }));
  const fields = fieldsOf(lines);
  const c = countParams(m);
  const allocated = lines.filter((l) => l.field !== 'overheadBytes').reduce((a, l) => a + l.bytes, 0);
  return {
    ...fields,
    sumBytes: fields.totalBytes,
    peakPhase: 'inference',
    lines,
    atPeak: fields,
    otherMoment: undefined,
    modelStates: { parametersBytes: fields.parametersBytes, gradientsBytes: 0, optimizerBytes: 0 },
    hostBytes: 0,
    hostParametersBytes: 0,
    hostOptimizerBytes: 0,
    offloadBytesPerStep: 0,
    params: c,
    localParams: localParams(c, m, o.parallel),
    allocatedPeakBytes: allocated,
    reservedPeakBytes: allocated,
    serving: s,
    fullLines: [],
  };
}
