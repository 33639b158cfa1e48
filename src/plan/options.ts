/** What a plan is asked about: precision, optimizer, parallel layout, and the estimate's shape. */
import { InvalidArgumentError } from '../errors.js';
import type { ModelConfig } from './model-config.js';
import type { ParamCounts } from './params.js';

export type Precision = 'fp32' | 'amp-bf16' | 'bf16' | 'fp8';
export type OptimizerName = 'adamw' | 'adam' | 'sgd' | 'adam8bit';
export type Recompute = 'none' | 'selective' | 'full';
export type Framework = 'pytorch' | 'megatron';
export type WeightFormat = 'fp32' | 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';
export type KvDtype = 'fp32' | 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';

export interface Parallelism {
  gpus: number;
  nodes: number;
  /** ZeRO stage (FSDP full sharding is stage 3). */
  zero: 0 | 1 | 2 | 3;
  tp: number;
  sp: boolean;
  pp: number;
  ep: number;
  /** Micro-batches in flight on the first pipeline stage (1F1B: the number of stages). */
  inFlight: number;
}

export interface TrainOptions {
  mode: 'train';
  precision: Precision;
  optimizer: OptimizerName;
  fusedOptimizer: boolean;
  batch: number;
  seq: number;
  gradAccum: number;
  recompute: Recompute;
  flashAttention: boolean;
  framework: Framework;
  parallel: Parallelism;
  offload: 'none' | 'optimizer' | 'params';
  /** Share of the estimate set aside for allocator fragmentation. */
  fragmentation: number;
}

export interface InferOptions {
  mode: 'infer';
  batch: number;
  prompt: number;
  newTokens: number;
  kvDtype: KvDtype;
  /** Paged KV cache block size in tokens (vLLM's default is 16); undefined for a contiguous cache. */
  blockSize: number | undefined;
  weights: WeightFormat;
  flashAttention: boolean;
  parallel: Parallelism;
  fragmentation: number;
}

export type PlanOptions = TrainOptions | InferOptions;

/** One named line of the estimate. */
export interface Line {
  name: string;
  bytes: number;
  note: string;
}

/** The byte totals of one GPU, as the plan's JSON prints them. */
export interface PerGpuBytes {
  parametersBytes: number;
  gradientsBytes: number;
  optimizerBytes: number;
  activationsBytes: number;
  kvCacheBytes: number;
  overheadBytes: number;
  /** The predicted peak (see peakPhase) plus the overhead lines. */
  totalBytes: number;
}

export interface Estimate extends PerGpuBytes {
  /** Everything added up as if all of it were held at once (an upper bound). */
  sumBytes: number;
  peakPhase: 'backward' | 'optimizer-step' | 'inference';
  /** Bytes kept in host memory by offloading: parameters, optimizer states. */
  hostBytes: number;
  hostParametersBytes: number;
  hostOptimizerBytes: number;
  /** Bytes moved across the host link per step by offloading (training) or 0. */
  offloadBytesPerStep: number;
  lines: Line[];
  params: ParamCounts;
  /** Parameters held on this GPU (before ZeRO sharding of the parameters themselves). */
  localParams: number;
}

/** Checks the parallel layout against the model; throws naming the field and the constraint. */
export function checkParallel(m: ModelConfig, p: Parallelism): void {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  if (m.heads % p.tp !== 0) fail(`--tp ${p.tp} does not divide the ${m.heads} attention heads`);
  if (m.kvHeads % p.tp !== 0 && p.tp % m.kvHeads !== 0) fail(`--tp ${p.tp} and the ${m.kvHeads} key/value heads do not divide one another`);
  if (m.layers % p.pp !== 0) fail(`--pp ${p.pp} does not divide the ${m.layers} layers`);
  if (p.gpus % p.nodes !== 0) fail(`--gpus ${p.gpus} is not divisible by --nodes ${p.nodes}`);
  if (p.gpus % (p.tp * p.pp) !== 0) fail(`--gpus ${p.gpus} is not divisible by --tp x --pp = ${p.tp * p.pp}`);
  if (p.sp && p.tp === 1) fail('--sp (sequence parallelism) needs --tp above 1');
  if (p.ep > 1) {
    if (!m.moe) fail(`--ep ${p.ep}: the model has no experts`);
    else if (m.moe.experts % p.ep !== 0) fail(`--ep ${p.ep} does not divide the ${m.moe.experts} experts`);
    if ((p.gpus / (p.tp * p.pp)) % p.ep !== 0) fail(`--ep ${p.ep} does not divide the data-parallel size ${p.gpus / (p.tp * p.pp)}`);
  }
}
