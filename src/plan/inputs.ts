/**
 * The planner's inputs (schema.ts: the CLI's options, the page's controls) turned into PlanOptions in one place, so
 * that the command line and the interactive page plan the same thing from the same inputs. Each refusal comes from
 * the module the rule belongs to: the schema's kinds and cross-option rules, the adapters', the framework's, the
 * engine's.
 */
import { type AllocConf, parseAllocConf } from '../allocator-model/alloc-conf.js';
import { InvalidArgumentError, isGpuError } from '../errors.js';
import { adapterRefusal } from './adapters.js';
import { parseEngineVersion } from './engines/registry.js';
import { parseTransformersVersion } from './engines/transformers-releases.js';
import { parseAwqVersion } from './engines/autoawq-releases.js';
import { frameworkOf } from './frameworks/registry.js';
import { torchtitanCommit } from './frameworks/torchtitan-commits.js';
import type { ModelConfig } from './model-config.js';
import type { InferOptions, LoraOptions, Parallelism, PlanOptions, ShardingName, TrainOptions } from './options.js';
import { checkInputs, DEFAULT_INPUTS, type InputName, LIMITS, type PlanInputs } from './schema.js';
import { microBatches, parseRunLengths } from './run-lengths.js';

export { DEFAULT_INPUTS, LIMITS, type PlanInputs };

/** True when release `v` (major.minor[.patch]) comes before `than`. */
function olderThan(v: string, than: [number, number, number]): boolean {
  const [a = 0, b = 0, c = 0] = v.split('.').map(Number);
  return a < than[0] || (a === than[0] && (b < than[1] || (b === than[1] && c < than[2])));
}

/**
 * The distributed strategy the inputs name: Megatron-LM's own optimizer; --fsdp the version given, else the
 * framework's (FSDP2 as torchtitan and torchtune apply it; LitGPT's FSDPStrategy is FSDP1); --zero N DeepSpeed's
 * ZeRO stage N; else one GPU or DDP.
 */
function shardingFor(i: PlanInputs): ShardingName {
  if (i.framework === 'megatron') return 'megatron';
  if (i.fsdp === '1') return 'fsdp1';
  if (i.fsdp === '2') return 'fsdp2';
  if (i.fsdp) return frameworkOf(i.framework).fsdp;
  return i.zero > 0 ? 'deepspeed' : 'ddp';
}

/** The adapters the inputs ask for, with the framework's and PEFT's defaults. */
function loraOf(i: PlanInputs): LoraOptions | undefined {
  if (i.lora === undefined) return undefined;
  const fw = frameworkOf(i.framework);
  const base = i.baseWeights ?? (i.precision === 'fp32' ? 'fp32' : 'bf16');
  const fourBit = base === 'nf4' || base === 'fp4';
  return {
    rank: i.lora,
    targets: i.loraTargets === undefined ? 'default' : i.loraTargets === 'all-linear' ? 'all-linear' : i.loraTargets.split(',').map((x) => x.trim()),
    dtype: i.loraDtype ?? fw.defaults?.(i).loraDtype,
    dropout: (i.loraDropout ?? 0) > 0,
    dora: i.dora,
    base,
    doubleQuant: i.doubleQuant,
    // bitsandbytes before 0.43.2 keeps each 4-bit matmul's input (PR #1270); a framework may pin a release
    quantKeepsInput: fourBit && olderThan(i.bnbVersion ?? fw.defaults?.(i).bnbVersion ?? '1.0', [0, 43, 2]),
  };
}

function trainOptions(i: PlanInputs, parallel: Parallelism): TrainOptions {
  const fw = frameworkOf(i.framework);
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
    // the unit layout of the torchtitan commit the run names (its apply_fsdp)
    fsdpUnits: i.torchtitan !== undefined ? torchtitanCommit(i.torchtitan).fsdpUnits : undefined,
    parallel,
    offload: i.offload,
    fragmentation: i.fragmentation,
    allocConf: allocConfOf(i),
    runBatches: i.runLengths ? microBatches(parseRunLengths(i.runLengths), i.seq, i.batch) : undefined,
    lora: loraOf(i),
    optimizerInBackward: i.optimizerInBackward,
    activationOffload: i.activationOffload,
    // a bare --compile is all of it
    compile: i.compile === true ? 'all' : i.compile,
    loss: fw.defaults?.(i).loss ?? i.loss,
  };
}

function inferOptions(i: PlanInputs, parallel: Parallelism): InferOptions {
  if (i.engine !== 'hf') parseEngineVersion(i.engine, i.engineVersion);
  else parseTransformersVersion(i.engineVersion);
  parseAwqVersion(i.awqVersion);
  return {
    mode: 'infer',
    batch: i.batch,
    prompt: i.context !== undefined ? i.context - i.newTokens : i.prompt,
    newTokens: i.newTokens,
    kvDtype: i.kvDtype,
    blockSize: i.blockSize,
    kvCache: i.kvCache,
    cacheLen: i.cacheLen,
    minNewTokens: i.minNewTokens,
    weights: i.weights,
    groupSize: i.groupSize,
    computeDtype: i.computeDtype,
    awqVersion: i.awqVersion,
    quantisedOutput: i.quantisedOutput,
    attention: i.flashAttention ? 'flash' : i.attention,
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
    allocConf: allocConfOf(i),
  };
}

/**
 * The inputs with the checkpoint's quantisation as the default weights: an inference plan of a model whose
 * config.json has a quantization_config plans its scheme, its group size and its compute dtype unless --weights is
 * given (and AwqConfig's do_fuse its fused cache unless --kv-cache is).
 * @throws InvalidArgumentError for --kv-cache awq-fused over weights that are not AWQ's
 */
export function checkpointInputs(m: Pick<ModelConfig, 'quantization'>, i: PlanInputs): PlanInputs {
  const q = m.quantization;
  const weights = i.mode === 'infer' && !(i.given ?? []).includes('weights') && q ? q.weights : i.weights;
  if (i.mode === 'infer' && i.kvCache === 'awq-fused' && !weights.startsWith('awq-'))
    throw new InvalidArgumentError(
      `--kv-cache awq-fused is AutoAWQ's fused modules: the weights are ${weights}; give --weights awq-int4 or awq-int4-gemv, or an AWQ checkpoint`,
    );
  if (!q || i.mode !== 'infer' || (i.given ?? []).includes('weights')) return i;
  const fused = q.kvCache && !(i.given ?? []).includes('kvCache') ? { kvCache: q.kvCache, cacheLen: i.cacheLen ?? q.cacheLen } : {};
  return { ...i, weights: q.weights, groupSize: i.groupSize ?? q.groupSize, computeDtype: i.computeDtype ?? q.computeDtype, ...fused };
}

/** --alloc-conf read as PyTorch reads PYTORCH_CUDA_ALLOC_CONF. @throws InvalidArgumentError naming the option */
function allocConfOf(i: PlanInputs): AllocConf | undefined {
  if (i.allocConf === undefined || i.allocConf === '') return undefined;
  try {
    return parseAllocConf(i.allocConf);
  } catch (e) {
    if (isGpuError(e)) throw new InvalidArgumentError(`--alloc-conf: ${e.message}`);
    throw e;
  }
}

/**
 * PlanOptions from the inputs.
 * @throws InvalidArgumentError for inputs out of their range or that contradict one another, naming them.
 */
export function planOptionsFrom(i: PlanInputs): PlanOptions {
  checkInputs(i);
  const given = new Set(i.given ?? []);
  const has = (k: InputName): boolean => given.has(k);
  if (i.mode === 'train') {
    const why = adapterRefusal(i, has) ?? frameworkOf(i.framework).refuse(i, has);
    if (why) throw new InvalidArgumentError(why);
  }
  const parallel: Parallelism = {
    gpus: i.gpus,
    nodes: i.nodes,
    zero: i.fsdp !== false ? 3 : (i.zero as Parallelism['zero']),
    tp: i.tp,
    sp: i.sp,
    pp: i.pp,
    ep: i.ep,
    inFlight: i.inFlight ?? i.pp,
  };
  return i.mode === 'train' ? trainOptions(i, parallel) : inferOptions(i, parallel);
}
