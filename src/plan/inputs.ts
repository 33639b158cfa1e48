/**
 * The planner's inputs as a person gives them (the CLI's options, the page's controls), turned into PlanOptions in
 * one place, so that the command line and the interactive page plan the same thing from the same inputs.
 */
import { InvalidArgumentError } from '../errors.js';
import type {
  AdapterDtype,
  Attention,
  BaseWeights,
  CompileScope,
  Framework,
  InferOptions,
  KvDtype,
  LossKind,
  OptimizerName,
  Parallelism,
  PlanOptions,
  Precision,
  Recompute,
  ShardingName,
  WeightFormat,
} from './options.js';
import { frameworkOf } from './frameworks/registry.js';
import { parseEngineVersion } from './engine-versions.js';
import { COMPILE_SCOPES } from './options.js';
import type { Engine } from './serve.js';

export interface PlanInputs {
  mode: 'train' | 'infer';
  /** adam8bit is taken as adamw8bit. */
  optimizer: OptimizerName | 'adam8bit';
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
  /**
   * Share of the estimate set aside for fragmentation (0.05 = 5%); undefined (the default): training replays the
   * step through PyTorch's caching allocator, inference sets aside 5%.
   */
  fragmentation?: number | undefined;
  /** --flash-attention: the same as attention 'flash' (refused beside another --attention). */
  flashAttention: boolean;
  /** LoRA rank; undefined: full fine-tuning. */
  lora?: number | undefined;
  /** 'all-linear' or module names separated by commas; undefined: PEFT's default for the model. */
  loraTargets?: string | undefined;
  loraDtype?: AdapterDtype | undefined;
  /** PEFT's lora_dropout (0, its default, keeps no mask). */
  loraDropout?: number | undefined;
  dora: boolean;
  /** The frozen base's format under --lora; undefined: the checkpoint's 16 bits (fp32 with --precision fp32). */
  baseWeights?: BaseWeights | undefined;
  doubleQuant: boolean;
  /** The bitsandbytes release a 4-bit base follows (e.g. 0.42); undefined: a current one (0.43.2 or later). */
  bnbVersion?: string | undefined;
  optimizerInBackward: boolean;
  activationOffload: boolean;
  /**
   * torch.compile, with or without a checkpoint: false none; true or 'all' the blocks and the loss (the CLI's bare
   * --compile); 'blocks' the transformer blocks only, the loss eager (--compile blocks).
   */
  compile: boolean | CompileScope;
  loss: LossKind;
  /** Host memory that offloading may fill (bytes); undefined: not checked. */
  hostMemoryBytes?: number | undefined;
  /**
   * The inputs a person set (the CLI's options given on the command line, the page's visible controls): a
   * contradiction is refused only between inputs given, never with a default.
   */
  given?: readonly string[] | undefined;
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
  flashAttention: false,
  dora: false,
  doubleQuant: false,
  optimizerInBackward: false,
  activationOffload: false,
  compile: false,
  loss: 'standard',
};

/**
 * The largest values a plan takes: past them no GPU cluster could hold the result, and a typo (a batch of 10^12)
 * would print a figure in the billions of GiB instead of an error.
 */
export const LIMITS = { batch: 1 << 20, tokens: 1 << 24, gpus: 1 << 20, steps: 1 << 16 };

/** The option each input is given by, as the CLI spells it (errors name it so on the page too). */
const flag = (k: string): string => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

const WHOLE: Array<[keyof PlanInputs, number]> = [
  ['batch', LIMITS.batch],
  ['seq', LIMITS.tokens],
  ['gradAccum', LIMITS.steps],
  ['prompt', LIMITS.tokens],
  ['newTokens', LIMITS.tokens],
  ['context', LIMITS.tokens],
  ['blockSize', LIMITS.tokens],
  ['maxModelLen', LIMITS.tokens],
  ['maxNumBatchedTokens', LIMITS.tokens],
  ['maxNumSeqs', LIMITS.batch],
  ['gpus', LIMITS.gpus],
  ['nodes', LIMITS.gpus],
  ['tp', LIMITS.gpus],
  ['pp', LIMITS.gpus],
  ['ep', LIMITS.gpus],
  ['inFlight', LIMITS.steps],
  ['lora', LIMITS.tokens],
];
const TRAIN_ONLY = [
  'seq',
  'gradAccum',
  'recompute',
  'precision',
  'optimizer',
  'fusedOptimizer',
  'framework',
  'zero',
  'fsdp',
  'offload',
  'lora',
  'loraTargets',
  'loraDtype',
  'loraDropout',
  'dora',
  'baseWeights',
  'doubleQuant',
  'bnbVersion',
  'optimizerInBackward',
  'activationOffload',
  'compile',
  'loss',
  'inFlight',
];
const INFER_ONLY = [
  'prompt',
  'newTokens',
  'context',
  'kvDtype',
  'blockSize',
  'weights',
  'engine',
  'gpuMemoryUtilization',
  'memFractionStatic',
  'maxModelLen',
  'maxNumBatchedTokens',
  'maxNumSeqs',
];
const ADAPTER_ONLY = ['loraTargets', 'loraDtype', 'loraDropout', 'dora', 'doubleQuant', 'bnbVersion'];

/**
 * Checks the inputs as the CLI and the page both take them: whole numbers within their limits, no contradiction
 * between inputs given, adapters' options only with --lora.
 * @throws InvalidArgumentError naming the option and the reason.
 */
export function checkInputs(i: PlanInputs): void {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  for (const [k, limit] of WHOLE) {
    const v = i[k];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || !Number.isInteger(v)) fail(`${flag(k)} must be a whole number, got ${String(v)}`);
    if ((v as number) < 1) fail(`${flag(k)} must be at least 1, got ${String(v)}`);
    if ((v as number) > limit) fail(`${flag(k)} ${String(v)} is beyond any machine (at most ${limit})`);
  }
  if (i.hostMemoryBytes !== undefined && !(i.hostMemoryBytes >= 1))
    fail(`--host-memory must be a size of at least 1 byte such as 512GiB, got ${i.hostMemoryBytes}`);
  if (i.fragmentation !== undefined && !(i.fragmentation >= 0 && i.fragmentation <= 1))
    fail(`--fragmentation must be a percentage from 0 to 100, got ${i.fragmentation * 100}`);
  for (const [k, v] of [
    ['gpuMemoryUtilization', i.gpuMemoryUtilization],
    ['memFractionStatic', i.memFractionStatic],
  ] as const)
    if (v !== undefined && !(v > 0 && v <= 1)) fail(`${flag(k)} must be a fraction above 0 and at most 1, got "${v}"`);
  if (i.loraDropout !== undefined && !(i.loraDropout >= 0 && i.loraDropout < 1))
    fail(`--lora-dropout must be a fraction from 0 to below 1, got "${i.loraDropout}"`);
  if (typeof i.compile !== 'boolean' && !COMPILE_SCOPES.includes(i.compile))
    fail(`--compile takes ${COMPILE_SCOPES.join(' or ')} (or nothing: all), got "${String(i.compile)}"`);
  const compileFlag = i.compile === 'blocks' ? '--compile blocks' : '--compile';
  const given = new Set(i.given ?? []);
  const has = (k: string): boolean => given.has(k);
  if (i.mode === 'train' && i.engine !== 'hf') fail('--engine is for --mode infer');
  if (i.mode === 'infer') for (const k of TRAIN_ONLY) if (has(k)) fail(`${flag(k)} is for training: it contradicts --mode infer`);
  if (i.mode === 'train') for (const k of INFER_ONLY) if (has(k)) fail(`${flag(k)} is for --mode infer: it contradicts training`);
  if (i.gpuMemoryUtilization !== undefined && i.engine !== 'vllm') fail("--gpu-memory-utilization is vLLM's: give --engine vllm");
  if (i.memFractionStatic !== undefined && i.engine !== 'sglang') fail("--mem-fraction-static is SGLang's: give --engine sglang");
  if ((i.engineVersion !== undefined || i.enforceEager) && i.engine === 'hf') fail('--engine-version and --enforce-eager are for --engine vllm or sglang');
  if (i.engine !== 'hf') parseEngineVersion(i.engine, i.engineVersion);
  if (i.fsdp && has('zero') && i.zero !== 3) fail(`--fsdp is ZeRO stage 3: it contradicts --zero ${i.zero}`);
  if (i.flashAttention && has('attention') && i.attention !== 'flash') fail(`--flash-attention contradicts --attention ${i.attention}`);
  if (i.mode !== 'train') return;
  const quantised = i.baseWeights === 'nf4' || i.baseWeights === 'fp4' || i.baseWeights === 'int8';
  if (i.lora === undefined) {
    if (quantised)
      fail(`a ${i.baseWeights === 'int8' ? '8-bit' : '4-bit'} base (--base-weights ${i.baseWeights}) cannot be fine-tuned in full: give --lora R (QLoRA)`);
    if (i.baseWeights !== undefined) fail('--base-weights is the frozen base under adapters: give --lora R');
    for (const k of ADAPTER_ONLY)
      if (has(k) || (k === 'dora' && i.dora) || (k === 'doubleQuant' && i.doubleQuant)) fail(`${flag(k)} needs adapters: give --lora R`);
  } else {
    if (i.framework === 'megatron') fail('--lora follows PEFT on PyTorch: it contradicts --framework megatron');
    if (i.precision !== 'amp-bf16' && i.precision !== 'bf16-pure' && i.precision !== 'fp32')
      fail(`--lora computes as PEFT does: --precision amp-bf16 (autocast, the default), bf16-pure (no autocast) or fp32, not ${i.precision}`);
    if (i.bnbVersion !== undefined) {
      if (!/^\d+\.\d+(\.\d+)?$/.test(i.bnbVersion)) fail(`--bnb-version takes a release such as 0.42 or 0.45.1, got "${i.bnbVersion}"`);
      if (i.baseWeights !== 'nf4' && i.baseWeights !== 'fp4') fail('--bnb-version is for a 4-bit base: give --base-weights nf4 or fp4');
    }
    if (i.doubleQuant && i.baseWeights !== 'nf4' && i.baseWeights !== 'fp4')
      fail("--double-quant quantises a 4-bit base's absmax: give --base-weights nf4 or fp4");
    if (i.baseWeights === 'fp32' && i.precision !== 'fp32' && i.precision !== 'amp-bf16') fail(`an fp32 base contradicts --precision ${i.precision}`);
  }
  if (i.optimizerInBackward) {
    if (i.gradAccum > 1) fail('--optimizer-in-backward steps each gradient as it is made: it cannot accumulate (--grad-accum 1), as torchtune refuses');
    if (i.offload !== 'none') fail('--optimizer-in-backward steps on the GPU: it contradicts --offload');
  }
  if (i.framework === 'litgpt') {
    // LitGPT's fine-tuning scripts always chunk the output layer and the loss (finetune/lora.py, full.py at 00af8b0)
    if (has('loss') && i.loss !== 'chunked') fail(`--framework litgpt runs its own chunked loss: it contradicts --loss ${i.loss}`);
    for (const [on, what] of [
      [!!i.compile, compileFlag],
      [i.activationOffload, '--activation-offload'],
      [i.optimizerInBackward, '--optimizer-in-backward'],
      [i.recompute === 'op', '--recompute op'],
      [i.precision === 'fp8-torchao', '--precision fp8-torchao'],
    ] as const)
      if (on) fail(`${what} is not something LitGPT's fine-tuning scripts do: it contradicts --framework litgpt`);
  }
  if (i.framework === 'megatron') {
    if (i.recompute === 'op') fail("--recompute op is torchtitan's per-op checkpointing: it contradicts --framework megatron");
    if (i.activationOffload) fail("--activation-offload is torchtune's: it contradicts --framework megatron");
    if (i.compile) fail(`${compileFlag} is for --framework pytorch`);
    if (i.loss !== 'standard') fail(`--loss ${i.loss} is for --framework pytorch`);
    if (i.precision === 'fp8-torchao') fail('--precision fp8-torchao is for --framework pytorch (Megatron-style fp8 is --precision fp8)');
  }
}

/**
 * The distributed strategy the inputs name: Megatron-LM's own optimizer; --fsdp the framework's FSDP (FSDP2 as
 * torchtitan and torchtune apply it; LitGPT's FSDPStrategy is FSDP1); --zero N DeepSpeed's ZeRO stage N; else one GPU
 * or DDP.
 */
function shardingFor(i: PlanInputs): ShardingName {
  if (i.framework === 'megatron') return 'megatron';
  if (i.fsdp) return frameworkOf(i.framework).fsdp;
  return i.zero > 0 ? 'deepspeed' : 'ddp';
}

/** True when release `v` (major.minor[.patch]) comes before `than`. */
function olderThan(v: string, than: [number, number, number]): boolean {
  const [a = 0, b = 0, c = 0] = v.split('.').map(Number);
  return a < than[0] || (a === than[0] && (b < than[1] || (b === than[1] && c < than[2])));
}

/** Module names from a comma-separated list. @throws InvalidArgumentError for an empty list or name. */
function targetList(v: string): string[] {
  const names = v.split(',').map((x) => x.trim());
  if (names.some((x) => !/^[A-Za-z_][\w.]*$/.test(x)))
    throw new InvalidArgumentError(`--lora-targets takes module names separated by commas (q_proj,v_proj) or all-linear, got "${v}"`);
  return names;
}

/**
 * PlanOptions from the inputs.
 * @throws InvalidArgumentError for inputs that contradict one another, naming them.
 */
export function planOptionsFrom(i: PlanInputs): PlanOptions {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  checkInputs(i);
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
      optimizer: i.optimizer === 'adam8bit' ? 'adamw8bit' : i.optimizer,
      fusedOptimizer: i.fusedOptimizer,
      batch: i.batch,
      seq: i.seq,
      gradAccum: i.gradAccum,
      recompute: i.recompute,
      attention: i.flashAttention ? 'flash' : i.attention,
      framework: i.framework,
      sharding: shardingFor(i),
      parallel,
      offload: i.offload,
      fragmentation: i.fragmentation,
      lora:
        i.lora === undefined
          ? undefined
          : {
              rank: i.lora,
              targets: i.loraTargets === undefined ? 'default' : i.loraTargets === 'all-linear' ? 'all-linear' : targetList(i.loraTargets),
              // LitGPT makes its adapters under the precision's default dtype (fabric.init_module)
              dtype: i.loraDtype ?? (i.framework === 'litgpt' && i.precision === 'bf16-pure' ? 'bf16' : undefined),
              dropout: (i.loraDropout ?? 0) > 0,
              dora: i.dora,
              base: i.baseWeights ?? (i.precision === 'fp32' ? 'fp32' : 'bf16'),
              doubleQuant: i.doubleQuant,
              // LitGPT pins bitsandbytes 0.42.0 and warns on any other (finetune/lora.py at 00af8b0)
              quantKeepsInput:
                (i.baseWeights === 'nf4' || i.baseWeights === 'fp4') && olderThan(i.bnbVersion ?? (i.framework === 'litgpt' ? '0.42' : '1.0'), [0, 43, 2]),
            },
      optimizerInBackward: i.optimizerInBackward,
      activationOffload: i.activationOffload,
      // a bare --compile is all of it
      compile: i.compile === true ? 'all' : i.compile,
      loss: i.framework === 'litgpt' ? 'chunked' : i.loss,
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
