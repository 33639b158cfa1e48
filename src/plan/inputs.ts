/**
 * The planner's inputs as a person gives them (the CLI's options, the page's controls), turned into PlanOptions in
 * one place, so that the command line and the interactive page plan the same thing from the same inputs.
 */
import { InvalidArgumentError } from '../errors.js';
import type { Attention, Framework, InferOptions, KvDtype, OptimizerName, Parallelism, PlanOptions, Precision, Recompute, WeightFormat } from './options.js';
import { parseEngineVersion } from './engine-versions.js';
import type { Engine } from './serve.js';

export interface PlanInputs {
  mode: 'train' | 'infer';
  optimizer: OptimizerName;
  fusedOptimizer: boolean;
  precision: Precision;
  /** Micro-batch (train) or concurrent sequences (infer). */
  batch: number;
  seq: number;
  gradAccum: number;
  recompute: Recompute;
  attention: Attention;
  framework: Framework;
  prompt: number;
  newTokens: number;
  /** Total context (infer): sets the prompt to context - new tokens. */
  context?: number | undefined;
  kvDtype: KvDtype;
  blockSize?: number | undefined;
  weights: WeightFormat;
  engine: Engine;
  gpuMemoryUtilization?: number | undefined;
  memFractionStatic?: number | undefined;
  maxModelLen?: number | undefined;
  /** vLLM's profiling run; undefined: the release's default. */
  maxNumBatchedTokens?: number | undefined;
  maxNumSeqs?: number | undefined;
  /** The vLLM or SGLang release the plan follows; undefined: the newest. */
  engineVersion?: string | undefined;
  /** No CUDA graphs (vLLM's --enforce-eager, SGLang's --disable-cuda-graph). */
  enforceEager: boolean;
  gpus: number;
  nodes: number;
  zero: 0 | 1 | 2 | 3;
  fsdp: boolean;
  tp: number;
  sp: boolean;
  pp: number;
  inFlight?: number | undefined;
  ep: number;
  offload: 'none' | 'optimizer' | 'params';
  /** Share of the estimate set aside for fragmentation (0.05 = 5%). */
  fragmentation: number;
}

/** The defaults: a stock PyTorch run on one GPU (and the engines' own defaults for serving). */
export const DEFAULT_INPUTS: PlanInputs = {
  mode: 'train',
  optimizer: 'adamw',
  fusedOptimizer: false,
  precision: 'amp-bf16',
  batch: 1,
  seq: 2048,
  gradAccum: 1,
  recompute: 'none',
  attention: 'sdpa',
  framework: 'pytorch',
  prompt: 512,
  newTokens: 512,
  kvDtype: 'bf16',
  weights: 'bf16',
  engine: 'hf',
  enforceEager: false,
  gpus: 1,
  nodes: 1,
  zero: 0,
  fsdp: false,
  tp: 1,
  sp: false,
  pp: 1,
  ep: 1,
  offload: 'none',
  fragmentation: 0.05,
};

/**
 * PlanOptions from the inputs.
 * @throws InvalidArgumentError for inputs that contradict one another, naming them.
 */
export function planOptionsFrom(i: PlanInputs): PlanOptions {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  if (i.mode === 'train' && i.engine !== 'hf') fail('--engine is for --mode infer');
  if (i.gpuMemoryUtilization !== undefined && i.engine !== 'vllm') fail("--gpu-memory-utilization is vLLM's: give --engine vllm");
  if (i.memFractionStatic !== undefined && i.engine !== 'sglang') fail("--mem-fraction-static is SGLang's: give --engine sglang");
  if ((i.engineVersion !== undefined || i.enforceEager) && i.engine === 'hf') fail('--engine-version and --enforce-eager are for --engine vllm or sglang');
  if (i.engine !== 'hf') parseEngineVersion(i.engine, i.engineVersion);
  const parallel: Parallelism = {
    gpus: i.gpus,
    nodes: i.nodes,
    zero: i.fsdp ? 3 : i.zero,
    tp: i.tp,
    sp: i.sp,
    pp: i.pp,
    ep: i.ep,
    inFlight: i.inFlight ?? i.pp,
  };
  if (i.mode === 'train')
    return {
      mode: 'train',
      precision: i.precision,
      optimizer: i.optimizer,
      fusedOptimizer: i.fusedOptimizer,
      batch: i.batch,
      seq: i.seq,
      gradAccum: i.gradAccum,
      recompute: i.recompute,
      attention: i.attention,
      framework: i.framework,
      parallel,
      offload: i.offload,
      fragmentation: i.fragmentation,
    };
  let prompt = i.prompt;
  if (i.context !== undefined) {
    if (i.context <= i.newTokens) fail(`--context ${i.context} must exceed --new-tokens ${i.newTokens}`);
    prompt = i.context - i.newTokens;
  }
  const infer: InferOptions = {
    mode: 'infer',
    batch: i.batch,
    prompt,
    newTokens: i.newTokens,
    kvDtype: i.kvDtype,
    blockSize: i.blockSize,
    weights: i.weights,
    attention: i.attention,
    engine: i.engine,
    serve: {
      memoryFraction: i.engine === 'sglang' ? i.memFractionStatic : i.gpuMemoryUtilization,
      maxModelLen: i.maxModelLen,
      blockSize: i.blockSize,
      maxNumBatchedTokens: i.maxNumBatchedTokens,
      maxNumSeqs: i.maxNumSeqs,
      engineVersion: i.engineVersion,
      enforceEager: i.enforceEager,
    },
    parallel,
    fragmentation: i.fragmentation,
  };
  return infer;
}
