/**
 * A serving engine (vLLM, SGLang): it takes a share of the GPU and gives the KV cache what the weights and its own
 * working memory leave, each release accounting in its own way. One file for the mechanism and one for the table of
 * releases per engine; a new release is a row in its table.
 */
import type { ModelConfig } from '../model-config.js';
import type { InferOptions, Line } from '../options.js';
import type { EngineVersion } from './versions.js';

/** What an engine holds at start-up, inside and outside its budget. */
export interface EngineMemory {
  fraction: number;
  fractionSource: string;
  budgetBytes: number;
  /** Lines inside the budget before the KV cache (weights, the profiling peak, memory outside PyTorch, graphs). */
  inside: Line[];
  /** Lines outside the budget (the CUDA context, graphs captured after the cache). */
  outside: Line[];
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  /** Whether its cache keeps a sliding-window layer's window only. */
  honoursWindows: boolean;
  /** The longest request the release runs (a release may cap the model's length). */
  maxModelLen: number;
  /** How the release prints the KV cache's tokens: its blocks times their size, or concurrency times max_model_len. */
  printedTokens: 'blocks' | 'concurrency';
  estimated: string[];
}

/** What an engine is asked for. */
export interface EngineRequest {
  m: ModelConfig;
  o: InferOptions;
  weightsBytes: number;
  capacityBytes: number;
  gpuName: string;
  /** The GPUs are joined by NVLink (peer copies faster than the host link). */
  nvlink: boolean;
  version: EngineVersion;
  maxModelLen: number;
}

export interface ServingEngine {
  readonly name: 'vllm' | 'sglang';
  readonly label: string;
  readonly oldest: string;
  readonly newest: string;
  /** Tokens per KV block by default (vLLM: 16; SGLang's page size: 1). */
  readonly blockSize: number;
  memory(r: EngineRequest): EngineMemory;
}
