/** What a plan is asked about: precision, optimizer, parallel layout, and the estimate's shape. */
import type { ComputeDtype } from './quant-schemes.js';
import type { AllocConf } from '../allocator-model/alloc-conf.js';
import type { MicroBatch } from './run-lengths.js';
import { InvalidArgumentError } from '../errors.js';
import type { ModelConfig } from './model-config.js';
import type { ParamCounts } from './params.js';
import type { Engine, ServeEstimate, ServeOptions } from './serve.js';

export type Precision = 'fp32' | 'amp-bf16' | 'bf16' | 'bf16-pure' | 'fp8' | 'fp8-torchao' | 'fp8-torchao-bf16';
/** Which tensors hold which dtype under each precision (the CLI's help prints these). */
export const PRECISIONS: Record<Precision, string> = {
  fp32: 'weights, gradients, optimizer states and activations in fp32',
  'amp-bf16':
    'torch.autocast: fp32 weights, gradients and optimizer states; matmul inputs and most activations in bf16, with a bf16 copy of each matmul weight cached for the step',
  bf16: 'bf16 weights, gradients and activations; fp32 master weights and optimizer states (Megatron-LM, DeepSpeed)',
  'bf16-pure':
    'everything in bf16: weights, gradients, optimizer states and activations, no fp32 copy (model.to(torch.bfloat16) with torch.optim.AdamW; torchtune)',
  fp8: 'bf16 weights with fp8 copies for the matmuls; fp32 master weights and optimizer states (Megatron-style)',
  'fp8-torchao':
    "torchao's float8 training as torchtitan runs it: the amp-bf16 run (fp32 weights, gradients and AdamW states; FSDP's bf16 param_dtype or autocast) with each nn.Linear a Float8Linear, its weight and input cast to fp8 while the matmul runs (the high-precision input is what autograd keeps)",
  'fp8-torchao-bf16':
    "torchao's float8 training over a model made bf16 first (model.to(torch.bfloat16), as torchao's README example does): bf16-pure with each nn.Linear a Float8Linear",
};
/**
 * The attention kernel. sdpa: PyTorch's scaled_dot_product_attention as Hugging Face calls it by default, which
 * picks a fused kernel (flash for 16-bit, memory-efficient otherwise) and falls back to the math kernel where none
 * applies; eager: the math kernel (the s x s matrix kept per head); flash: a fused kernel always.
 */
export type Attention = 'sdpa' | 'eager' | 'flash';
/**
 * adamw / adam: torch.optim (foreach by default); sgd: with momentum; adamw8bit: bitsandbytes' or torchao's 8-bit
 * AdamW (two 1-byte states per parameter, a step without foreach temporaries); paged-*: bitsandbytes' paged
 * optimizers, whose states live in CUDA managed memory outside PyTorch's allocator.
 */
export type OptimizerName = 'adamw' | 'adam' | 'sgd' | 'adamw8bit' | 'paged-adamw' | 'paged-adamw8bit';
/** none; selective (attention recomputed); full (every layer: Hugging Face's gradient checkpointing); op (torchtitan's per-op selective checkpointing). */
export type Recompute = 'none' | 'selective' | 'full' | 'op';
/** standard: Hugging Face's cross-entropy on full fp32 logits; chunked: torchtune / LitGPT chunked cross-entropy; fused: Liger-style fused linear cross-entropy. */
export type LossKind = 'standard' | 'chunked' | 'fused';
/**
 * What torch.compile compiles: `all` the blocks and the loss (torch.compile(model), torchtune's compile, torchtitan's
 * from the commits that compile its loss), `blocks` the transformer blocks alone, the loss eager (torchtitan at
 * 9dec370: apply_compile wraps each TransformerBlock, train.py compiles no loss).
 */
export type CompileScope = 'all' | 'blocks';
export const COMPILE_SCOPES: readonly CompileScope[] = ['all', 'blocks'];
/** The format of a frozen base under adapters: 16/32-bit, bitsandbytes 4-bit (NF4, FP4) or LLM.int8(). */
export type BaseWeights = 'fp32' | 'bf16' | 'fp16' | 'nf4' | 'fp4' | 'int8';
export type AdapterDtype = 'fp32' | 'bf16' | 'fp16';

/** LoRA (PEFT): the base frozen, adapters A (r x in) and B (out x r) on the target linear layers. */
export interface LoraOptions {
  rank: number;
  /** Module names as PEFT takes them, 'all-linear', or 'default' (PEFT's default for the model type). */
  targets: 'default' | 'all-linear' | string[];
  /** The adapters' dtype: undefined = PEFT's default (fp32 under a 16-bit base: autocast_adapter_dtype=True). */
  dtype: AdapterDtype | undefined;
  /** lora_dropout above 0 (a mask and a dropped copy of each adapted layer's input are kept). */
  dropout: boolean;
  /** Weight-decomposed LoRA: a magnitude vector per adapted layer and the layer's output kept for the backward pass. */
  dora: boolean;
  /** The frozen base's format. */
  base: BaseWeights;
  /** bitsandbytes' bnb_4bit_use_double_quant: the 4-bit absmax quantised to 8 bits. */
  doubleQuant: boolean;
  /**
   * bitsandbytes before 0.43.2 (LitGPT pins 0.42): its 4-bit matmul keeps its input for the backward pass
   * (MatMul4Bit's ctx.tensors = (A, B)); from 0.43.2 (bitsandbytes PR #1270) it keeps only the weight.
   */
  quantKeepsInput?: boolean | undefined;
}
export type Framework = 'pytorch' | 'megatron' | 'litgpt';
/** The distributed strategy (strategies/): one GPU or DDP, DeepSpeed ZeRO, FSDP1, FSDP2, Megatron's distributed optimizer. */
export type ShardingName = 'ddp' | 'deepspeed' | 'fsdp1' | 'fsdp2' | 'megatron';
/**
 * How FSDP2's fully_shard units hold the ends (strategies/fsdp2.ts). root-ends: the embeddings, the final norm and
 * the output layer in the root unit, gathered for the whole micro-batch, the last block kept gathered after its
 * forward pass (torchtitan before 83e6941). ends-apart: the embeddings their own unit, resharded after the forward
 * pass; [final norm, output layer] one unit kept from its forward to its backward pass; every block resharded; the
 * root holds nothing (torchtitan from 83e6941; frameworks/torchtitan-commits.ts).
 */
export type Fsdp2Units = 'root-ends' | 'ends-apart';
/**
 * Inference weight formats: 16/32-bit, the generic quantised checkpoints (fp8, int8, int4: a per-weight figure) and
 * the quantisation schemes whose layouts gpumem follows (quant-schemes.ts): bitsandbytes NF4 / FP4 with or without
 * double quantisation and LLM.int8(), GPTQ (exllamav2 or exllama kernels) and AWQ (GEMM or GEMV).
 */
export const WEIGHT_FORMATS = [
  'fp32',
  'bf16',
  'fp16',
  'fp8',
  'int8',
  'int4',
  'nf4',
  'nf4-dq',
  'fp4',
  'fp4-dq',
  'bnb-int8',
  'gptq-int4',
  'gptq-int4-exllama',
  'awq-int4',
  'awq-int4-gemv',
] as const;
export type WeightFormat = (typeof WEIGHT_FORMATS)[number];
export type KvDtype = 'fp32' | 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';
/**
 * Hugging Face generate's KV cache: dynamic (DynamicCache, stock generate: each layer's cache grown by concatenation),
 * static (StaticCache, LitGPT's KVCache: every layer's cache made at its full length before the prefill), awq-fused
 * (AutoAWQ's fused modules, transformers' AwqConfig(do_fuse=True) or from_quantized(fuse_layers=True): a WindowedCache
 * of fp16 keys and values per layer made at load, and the fused attention's own prefill).
 */
export const KV_CACHES = ['dynamic', 'static', 'awq-fused'] as const;
export type KvCache = (typeof KV_CACHES)[number];

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
  attention: Attention;
  framework: Framework;
  /** Where the states live and how they are sharded over the data-parallel GPUs (parallel.zero is the stage). */
  sharding: ShardingName;
  /** FSDP2's units of the ends (default root-ends); a torchtitan commit's row sets it (--torchtitan). */
  fsdpUnits?: Fsdp2Units | undefined;
  parallel: Parallelism;
  offload: 'none' | 'optimizer' | 'params';
  /**
   * Share of the estimate set aside for allocator fragmentation; undefined (the default): the step is replayed
   * through PyTorch's caching allocator (program/replay.ts over allocator-model/torch-caching.ts) and what it holds without tensors is counted instead.
   */
  fragmentation?: number | undefined;
  /** PYTORCH_CUDA_ALLOC_CONF's settings the step is replayed under (undefined: PyTorch's defaults). */
  allocConf?: AllocConf | undefined;
  /**
   * The whole run's micro-batches (run-lengths.ts: samples and the length they are padded to), in the order they run:
   * the reserved figure is then the peak over the run replayed through one caching allocator, as max_memory_reserved()
   * read after trainer.train() reports it, rather than one step's at `seq`. Undefined: every micro-batch at `seq`.
   */
  runBatches?: readonly MicroBatch[] | undefined;
  /** Adapter fine-tuning; undefined = full fine-tuning. */
  lora?: LoraOptions | undefined;
  /** The optimizer step fused into the backward pass (torchtune's optimizer_in_bwd): no gradient outlives its step. */
  optimizerInBackward?: boolean | undefined;
  /** torchtune's activation offloading: kept activations go to pinned host memory during the forward pass. */
  activationOffload?: boolean | undefined;
  /**
   * torch.compile on the blocks and the loss (torch.compile(model), torchtune's and torchtitan's compile). Without a
   * checkpoint, the blocks keep what inductor's min-cut partitioner saves (program/compiled.ts); under one
   * (--recompute full or op) the checkpoint decides, less what the backward never reads, and a recomputed block holds
   * what its compiled backward graph materialises (program/compiled.ts).
   * The compiled cross-entropy keeps the 16-bit logits and a log-sum-exp per token. `true` is `all`; `blocks` compiles
   * the blocks alone: the final norm, the output layer and the loss run eager (compilesLoss).
   */
  compile?: boolean | CompileScope | undefined;
  /** How the loss is computed (default standard). */
  loss?: LossKind | undefined;
}

export interface InferOptions {
  mode: 'infer';
  batch: number;
  prompt: number;
  newTokens: number;
  kvDtype: KvDtype;
  /** Paged KV cache block size in tokens (vLLM's default is 16); undefined for a contiguous cache. */
  blockSize: number | undefined;
  /** How Hugging Face generate keeps the cache (undefined: dynamic, stock generate's). */
  kvCache?: KvCache | undefined;
  /** The length a static or awq-fused cache is made at (max_cache_len, fuse_max_seq_len); undefined: prompt + new tokens. */
  cacheLen?: number | undefined;
  /** Hugging Face generate's min_new_tokens (its two length processors run each step until it is reached). */
  minNewTokens?: number | undefined;
  weights: WeightFormat;
  /** The quantisation group (GPTQ / AWQ group_size, bitsandbytes' blocksize); undefined: the scheme's default. */
  groupSize?: number | undefined;
  /** bitsandbytes 4-bit: the dtype its matmuls compute in (bnb_4bit_compute_dtype). */
  computeDtype?: ComputeDtype | undefined;
  /** AWQ GEMM: the AutoAWQ release its matmuls follow (undefined: the newest). */
  awqVersion?: string | undefined;
  /** bitsandbytes: the output layer quantised too (Lightning's BitsandbytesPrecision, as LitGPT's generate uses it). */
  quantisedOutput?: boolean | undefined;
  attention: Attention;
  /** hf: Hugging Face generate (the estimate below); vllm, sglang: the engine sizes its KV cache itself (serve.ts). */
  engine: Engine;
  serve: ServeOptions;
  parallel: Parallelism;
  /** Share of the estimate set aside for allocator fragmentation (5% when undefined). */
  fragmentation?: number | undefined;
  /** PYTORCH_CUDA_ALLOC_CONF's settings generate is replayed under (undefined: PyTorch's defaults). */
  allocConf?: AllocConf | undefined;
}

export type PlanOptions = TrainOptions | InferOptions;

/** The kinds of memory a GPU holds; each line of an estimate belongs to one. */
export const LINE_FIELDS = [
  'parametersBytes',
  'gradientsBytes',
  'optimizerBytes',
  'activationsBytes',
  'autocastCacheBytes',
  'logitsBytes',
  'optimizerTemporariesBytes',
  'kvCacheBytes',
  'workspaceBytes',
  'overheadBytes',
] as const;
export type LineField = (typeof LINE_FIELDS)[number];

/** One named line of the estimate, and the field of PerGpuBytes it counts in. */
export interface Line {
  name: string;
  bytes: number;
  note: string;
  field: LineField;
  /** Held outside PyTorch's caching allocator (CUDA managed memory, the context): not in max_memory_allocated. */
  outsideAllocator?: boolean;
  /** Reserved by the caching allocator without a tensor in it: in max_memory_reserved, not in max_memory_allocated. */
  cached?: boolean;
}

/**
 * What the most-loaded GPU holds, by kind: each field is that kind at its full size (the most any moment of the step
 * holds of it: activations at the start of the backward pass, gradients and optimizer temporaries at the optimizer
 * step). totalBytes is the peak: the lines held at one moment (Estimate.lines), less than the fields' sum when the
 * kinds peak at different moments.
 */
export interface PerGpuBytes {
  parametersBytes: number;
  gradientsBytes: number;
  /** Optimizer states, fp32 master weights included. */
  optimizerBytes: number;
  /** Activations kept for the backward pass (training) or live in the forward pass (inference). */
  activationsBytes: number;
  /** torch.autocast's bf16 copies of the matmul weights. */
  autocastCacheBytes: number;
  /** fp32 logits or log-probabilities for the loss, and their gradient at the start of the backward pass. */
  logitsBytes: number;
  /** Temporaries of a foreach optimizer step. */
  optimizerTemporariesBytes: number;
  kvCacheBytes: number;
  /** Other transient buffers: a KV cache growing by copy, key and value heads repeated for one layer. */
  workspaceBytes: number;
  /** CUDA/HIP context, communication buffers, fragmentation allowance. */
  overheadBytes: number;
  /** The peak of the step: the lines of its moment and the overhead lines added up. */
  totalBytes: number;
}

/** Sums lines into the fields they belong to; totalBytes is their sum. */
export function fieldsOf(lines: readonly Line[]): PerGpuBytes {
  const out = Object.fromEntries([...LINE_FIELDS, 'totalBytes'].map((k) => [k, 0])) as unknown as PerGpuBytes;
  for (const l of lines) {
    out[l.field] += l.bytes;
    out.totalBytes += l.bytes;
  }
  return out;
}

/** Each field at its full size over several moments (the largest of them), totalBytes the largest moment's. */
export function fieldsOver(moments: ReadonlyArray<readonly Line[]>, overhead: readonly Line[]): PerGpuBytes {
  const each = moments.map(fieldsOf);
  const out = fieldsOf(overhead);
  for (const k of LINE_FIELDS) if (k !== 'overheadBytes') out[k] = Math.max(...each.map((f) => f[k]));
  out.totalBytes += Math.max(...each.map((f) => f.totalBytes));
  return out;
}

/** One moment of a step: what is held then. */
export interface Moment {
  phase: 'backward' | 'optimizer-step' | 'prefill' | 'decode';
  /** Bytes held, overhead lines excluded. */
  bytes: number;
  lines: Line[];
}

export interface Estimate extends PerGpuBytes {
  /** Everything added up as if all of it were held at once (an upper bound). */
  sumBytes: number;
  peakPhase: 'backward' | 'optimizer-step' | 'inference';
  /** The lines held at the peak moment, then the overhead lines: they add up to totalBytes. */
  lines: Line[];
  /** The fields of the peak moment alone (with the overhead): what a bar of the peak shows. */
  atPeak: PerGpuBytes;
  /** The moment of the step that is not the peak (training: the other of backward and optimizer step). */
  otherMoment: Moment | undefined;
  /** The model states at their full size on this GPU, whichever moment holds them. */
  modelStates: { parametersBytes: number; gradientsBytes: number; optimizerBytes: number };
  /** Bytes kept in host memory by offloading: parameters, optimizer states. */
  hostBytes: number;
  hostParametersBytes: number;
  hostOptimizerBytes: number;
  /** Activations offloaded to pinned host memory (torchtune's activation offloading). */
  hostActivationsBytes?: number;
  /** Bytes moved across the host link per step by offloading (training) or 0. */
  offloadBytesPerStep: number;
  params: ParamCounts;
  /** Parameters held on this GPU (before ZeRO sharding of the parameters themselves). */
  localParams: number;
  /** What torch.cuda.max_memory_allocated() reports (tensors in the caching allocator's blocks). */
  allocatedPeakBytes: number;
  /** What max_memory_reserved() reports. */
  reservedPeakBytes: number;
  /** vLLM or SGLang: the KV cache the engine sizes at start-up. */
  serving?: ServeEstimate | undefined;
  /** Every line at its full size: the most it held at any moment of the step (empty for a serving engine). */
  fullLines: Line[];
}

/** Whether the attention kernel stores no s x s matrix, for a model at a precision. */
export function fusedAttention(m: ModelConfig, attention: Attention, precision: Precision | WeightFormat): boolean {
  if (attention !== 'sdpa') return attention === 'flash';
  // SDPA's flash kernel needs 16-bit inputs; the memory-efficient kernel takes fp32 but not grouped-query attention
  // (enable_gqa, as Hugging Face calls SDPA for models with fewer key/value heads): then SDPA runs the math kernel.
  return !(precision === 'fp32' && m.kvHeads < m.heads);
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

/** True when torch.compile runs the transformer blocks (`--compile`, `--compile all`, `--compile blocks`). */
export function compilesBlocks(o: { compile?: boolean | CompileScope | undefined }): boolean {
  return !!o.compile;
}

/** True when torch.compile runs the final norm, the output layer and the loss too (`--compile` or `--compile all`). */
export function compilesLoss(o: { compile?: boolean | CompileScope | undefined }): boolean {
  return o.compile === true || o.compile === 'all';
}
