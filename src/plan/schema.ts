/**
 * The planner's options, declared once: each input's kind, default, choices, limits, help text, which runs it applies
 * to, and its control on the interactive page. The CLI's flags (cli/plan-command.ts), the page's controls
 * (render/plan-page.ts), the defaults, the checks and the contradictions between inputs given (checkInputs) are all
 * derived from this table; PlanInputs is its type. What a framework or an engine refuses lives in its own module.
 */
import { InvalidArgumentError } from '../errors.js';
import { generateRelease } from './engines/transformers-releases.js';
import { KV_CACHES, WEIGHT_FORMATS } from './options.js';
import { RUN_LENGTHS_PATTERN } from './run-lengths.js';

/** Where an option applies: its mode, and what else it needs (adapters, a serving engine). */
interface Applies {
  mode?: 'train' | 'infer';
  /** Adapters (--lora R). */
  lora?: true;
  /** A serving engine (--engine vllm or sglang); a name: that engine only. */
  engine?: true | 'vllm' | 'sglang';
}

interface Base {
  help: string;
  /** The CLI's placeholder (<n>, <f>, <list>). */
  arg?: string;
  applies?: Applies;
  /** The page's control: its label and its section; false: none (a CLI alias or a setting the page does not offer). */
  page?: { label: string } | false;
}

export type OptionSpec =
  | (Base & { kind: 'int'; default?: number; limit: number; min?: number })
  | (Base & { kind: 'choice'; choices: readonly string[]; default?: string })
  | (Base & { kind: 'flag' })
  | (Base & { kind: 'fraction'; below1?: boolean; zero?: boolean })
  | (Base & { kind: 'text'; pattern?: RegExp; example?: string })
  | (Base & { kind: 'bytes' })
  | (Base & { kind: 'percent' })
  | (Base & { kind: 'scope'; choices: readonly string[]; bare: string });

/**
 * The largest values a plan takes: past them no GPU cluster could hold the result, and a typo (a batch of 10^12)
 * would print a figure in the billions of GiB instead of an error.
 */
export const LIMITS = { batch: 1 << 20, tokens: 1 << 24, gpus: 1 << 20, steps: 1 << 16 };

const TRAIN: Applies = { mode: 'train' };
const INFER: Applies = { mode: 'infer' };
const ADAPTERS: Applies = { mode: 'train', lora: true };

/** The options, in the order --help and the page show them. */
export const SCHEMA = {
  mode: { kind: 'choice', choices: ['train', 'infer'], default: 'train', help: 'train or infer', page: { label: 'mode' } },
  precision: {
    kind: 'choice',
    choices: ['fp32', 'amp-bf16', 'bf16', 'bf16-pure', 'fp8', 'fp8-torchao', 'fp8-torchao-bf16'],
    default: 'amp-bf16',
    help: 'which tensors hold which dtype (training; see PRECISIONS)',
    applies: TRAIN,
    page: { label: 'precision' },
  },
  optimizer: {
    kind: 'choice',
    choices: ['adamw', 'adam', 'sgd', 'adamw8bit', 'adam8bit', 'paged-adamw', 'paged-adamw8bit'],
    default: 'adamw',
    help: "adamw, adam (torch.optim, foreach by default), sgd (with momentum), adamw8bit (bitsandbytes / torchao 8-bit AdamW; adam8bit is the same), paged-adamw, paged-adamw8bit (bitsandbytes' paged optimizers: states in CUDA managed memory)",
    applies: TRAIN,
    page: { label: 'optimizer' },
  },
  fusedOptimizer: { kind: 'flag', help: 'a fused optimizer step (no parameter-sized temporaries)', applies: TRAIN, page: { label: 'fused optimizer step' } },
  optimizerInBackward: {
    kind: 'flag',
    help: "the optimizer step fused into the backward pass (torchtune's optimizer_in_bwd): no gradient outlives its step",
    applies: TRAIN,
    page: { label: 'optimizer in backward' },
  },
  batch: { kind: 'int', default: 1, limit: LIMITS.batch, arg: '<n>', help: 'micro-batch (train) or concurrent sequences (infer)', page: { label: 'batch' } },
  seq: { kind: 'int', default: 2048, limit: LIMITS.tokens, arg: '<n>', help: 'sequence length (train)', applies: TRAIN, page: { label: 'sequence' } },
  gradAccum: {
    kind: 'int',
    default: 1,
    limit: LIMITS.steps,
    arg: '<n>',
    help: 'gradient accumulation steps',
    applies: TRAIN,
    page: { label: 'gradient accumulation' },
  },
  recompute: {
    kind: 'choice',
    choices: ['none', 'selective', 'full', 'op'],
    default: 'none',
    help: "activation recomputation: none; selective (attention); full (every layer: Hugging Face's gradient checkpointing); op (torchtitan's per-op selective checkpointing)",
    applies: TRAIN,
    page: { label: 'recompute' },
  },
  attention: {
    kind: 'choice',
    choices: ['sdpa', 'eager', 'flash'],
    default: 'sdpa',
    help: "sdpa: PyTorch's scaled_dot_product_attention as Hugging Face calls it by default (a fused kernel where one applies); eager: the math kernel, an s x s matrix kept per head; flash: a fused kernel always",
    page: { label: 'attention' },
  },
  flashAttention: { kind: 'flag', help: 'the same as --attention flash', page: false },
  framework: {
    kind: 'choice',
    choices: ['pytorch', 'megatron', 'litgpt'],
    default: 'pytorch',
    help: "pytorch (eager, Hugging Face blocks; measured), megatron (Megatron-LM: bf16 parameters, fp32 main gradients, the distributed optimizer with --zero 1, fused Adam, activations by Korthikanti et al. 2022) or litgpt (LitGPT's fine-tuning scripts: its model code, its 128-token chunked loss, Lightning's bitsandbytes handling with the output layer quantised, bitsandbytes 0.42)",
    applies: TRAIN,
    page: { label: 'framework' },
  },
  lora: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<r>',
    help: 'LoRA adapters of rank r (PEFT): the base frozen, only the adapters train',
    applies: TRAIN,
    page: { label: 'LoRA rank (empty: full fine-tuning)' },
  },
  loraTargets: {
    kind: 'text',
    arg: '<list>',
    pattern: /^(all-linear|[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*)$/,
    example: 'module names separated by commas (q_proj,v_proj) or all-linear',
    help: "module names as PEFT takes them (q_proj,v_proj) or all-linear (default: PEFT's default for the model: q_proj,v_proj for Llama-style models, c_attn for GPT-2)",
    applies: ADAPTERS,
    page: { label: 'LoRA targets' },
  },
  loraDtype: {
    kind: 'choice',
    choices: ['fp32', 'bf16', 'fp16'],
    help: "the adapters' dtype (default: PEFT's, fp32 under a 16-bit base: autocast_adapter_dtype=True)",
    applies: ADAPTERS,
    page: { label: 'LoRA dtype' },
  },
  loraDropout: {
    kind: 'fraction',
    below1: true,
    zero: true,
    arg: '<p>',
    help: "PEFT's lora_dropout (default 0: no mask kept)",
    applies: ADAPTERS,
    page: { label: 'LoRA dropout' },
  },
  dora: {
    kind: 'flag',
    help: "weight-decomposed LoRA (use_dora=True): a magnitude per output and each adapted layer's output kept",
    applies: ADAPTERS,
    page: { label: 'DoRA' },
  },
  baseWeights: {
    kind: 'choice',
    choices: ['fp32', 'bf16', 'fp16', 'nf4', 'fp4', 'int8'],
    help: "the frozen base under --lora: fp32, bf16, fp16, nf4 or fp4 (bitsandbytes 4-bit with its quant state; the other parameters in 16 bits as loaded), int8 (LLM.int8()); default the checkpoint's bf16",
    applies: TRAIN,
    page: { label: 'base weights' },
  },
  doubleQuant: {
    kind: 'flag',
    help: "bitsandbytes' bnb_4bit_use_double_quant: the 4-bit absmax in 8 bits (default off, as BitsAndBytesConfig)",
    applies: ADAPTERS,
    page: { label: 'double quantisation' },
  },
  bnbVersion: {
    kind: 'text',
    arg: '<v>',
    pattern: /^\d+\.\d+(\.\d+)?$/,
    example: 'a release such as 0.42 or 0.45.1',
    help: 'the bitsandbytes release a 4-bit base runs on (default a current one): before 0.43.2 its 4-bit matmul keeps each input for the backward pass (LitGPT pins 0.42)',
    applies: ADAPTERS,
    page: { label: 'bitsandbytes release (4-bit base)' },
  },
  activationOffload: {
    kind: 'flag',
    help: "torchtune's activation offloading: kept activations go to pinned host memory (about two layers stay)",
    applies: TRAIN,
    page: { label: 'activation offloading' },
  },
  compile: {
    kind: 'scope',
    choices: ['all', 'blocks'],
    bare: 'all',
    arg: '[what]',
    help: "torch.compile: all (the default when given bare) the blocks and the loss, as torch.compile(model) and torchtune; blocks: the transformer blocks only, the loss eager (torchtitan's apply_compile before it compiled the loss). Without a checkpoint, what its min-cut partitioner keeps per block; with --recompute full or op, the checkpoint decides, less what the backward never reads; the compiled cross-entropy keeps 16-bit logits",
    applies: TRAIN,
    page: { label: 'torch.compile' },
  },
  loss: {
    kind: 'choice',
    choices: ['standard', 'chunked', 'fused'],
    default: 'standard',
    help: "standard: Hugging Face's cross-entropy on full fp32 logits; chunked: torchtune / LitGPT chunked cross-entropy; fused: Liger-style fused linear cross-entropy (no logits kept)",
    applies: TRAIN,
    page: { label: 'loss' },
  },
  prompt: { kind: 'int', default: 512, limit: LIMITS.tokens, arg: '<n>', help: 'prompt tokens (infer)', applies: INFER, page: false },
  newTokens: { kind: 'int', default: 512, limit: LIMITS.tokens, arg: '<n>', help: 'generated tokens (infer)', applies: INFER, page: { label: 'new tokens' } },
  context: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: 'total context (infer): sets the prompt to context - new tokens',
    applies: INFER,
    page: { label: 'context' },
  },
  kvDtype: {
    kind: 'choice',
    choices: ['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4'],
    default: 'bf16',
    help: "the KV cache's dtype",
    applies: INFER,
    page: { label: 'KV cache' },
  },
  blockSize: { kind: 'int', limit: LIMITS.tokens, arg: '<n>', help: 'paged KV cache block size in tokens', applies: INFER, page: { label: 'KV block size' } },
  kvCache: {
    kind: 'choice',
    choices: KV_CACHES,
    default: 'dynamic',
    help: "Hugging Face generate's KV cache: dynamic (DynamicCache, grown by concatenation: stock generate), static (StaticCache, LitGPT's KVCache: made at --cache-len before the prefill), awq-fused (AutoAWQ's fused modules, AwqConfig(do_fuse=True) / fuse_layers=True: an fp16 WindowedCache of --cache-len tokens per layer made at load, and the fused attention's prefill scores)",
    applies: INFER,
    page: { label: 'KV cache kind' },
  },
  minNewTokens: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: "Hugging Face generate's min_new_tokens: until that many tokens are made, MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor each clone the fp32 scores and mask the end-of-sequence token (default: none, as a stock generation config)",
    applies: INFER,
    page: { label: 'min new tokens' },
  },
  cacheLen: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: 'the length --kv-cache static or awq-fused makes its cache at (max_cache_len, fuse_max_seq_len / max_seq_len); default: prompt + new tokens',
    applies: INFER,
    page: { label: 'cache length' },
  },
  weights: {
    kind: 'choice',
    choices: WEIGHT_FORMATS,
    default: 'bf16',
    help: "inference weight format: fp32, bf16, fp16; a quantised checkpoint per weight (int4: 0.5 + 2/64 bytes, int8, fp8); or a scheme's own layout: bitsandbytes nf4, fp4 (-dq: double quantisation), bnb-int8 (LLM.int8()); gptq-int4 (exllamav2 kernel, its scratch), gptq-int4-exllama (exllama v1); awq-int4 (GEMM), awq-int4-gemv. Embeddings and the output layer stay 16-bit. Default: the checkpoint's quantization_config, else bf16",
    applies: INFER,
    page: { label: 'weights' },
  },
  groupSize: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: "the quantisation group of --weights gptq-*, awq-* (group_size, default 128) or bitsandbytes 4-bit (blocksize, default 64); default: the checkpoint's quantization_config",
    applies: INFER,
    page: { label: 'quantisation group' },
  },
  computeDtype: {
    kind: 'choice',
    choices: ['fp16', 'bf16', 'fp32'],
    help: "bitsandbytes 4-bit: the dtype its matmuls compute in (bnb_4bit_compute_dtype; transformers' default fp32, LitGPT's its --precision); a prefill dequantises each weight to fp16 and casts it to this",
    applies: INFER,
    page: { label: 'bnb compute dtype' },
  },
  awqVersion: {
    kind: 'text',
    arg: '<v>',
    pattern: /^\d{1,3}\.\d{1,3}(\.\d{1,3})?$/,
    example: 'a release such as 0.1.8 or 0.2.6',
    help: "the AutoAWQ release an AWQ GEMM checkpoint runs on (default the newest, 0.2.9): from 0.2.0 a prefill of 1024 tokens or more dequantises each weight to fp16 for torch.matmul, before it the split-k kernel's 8 partial outputs",
    applies: INFER,
    page: { label: 'AutoAWQ release' },
  },
  quantisedOutput: {
    kind: 'flag',
    help: "bitsandbytes: the output layer quantised too, as LitGPT's generate (Lightning's BitsandbytesPrecision converts every nn.Linear); transformers keeps lm_head in 16 bits (get_keys_to_not_convert)",
    applies: INFER,
    page: { label: 'output layer quantised' },
  },
  engine: {
    kind: 'choice',
    choices: ['hf', 'vllm', 'sglang'],
    default: 'hf',
    help: 'inference: hf (Hugging Face generate), vllm or sglang (the engine sizes its KV cache from the memory left)',
    applies: INFER,
    page: { label: 'engine' },
  },
  gpuMemoryUtilization: {
    kind: 'fraction',
    arg: '<f>',
    help: "vllm: share of the GPU it takes (default: the release's)",
    applies: { mode: 'infer', engine: 'vllm' },
    page: { label: 'gpu_memory_utilization' },
  },
  memFractionStatic: {
    kind: 'fraction',
    arg: '<f>',
    help: "sglang: share of the GPU for weights and KV cache (default: the release's)",
    applies: { mode: 'infer', engine: 'sglang' },
    page: { label: 'mem_fraction_static' },
  },
  maxModelLen: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: "vllm/sglang: longest request in tokens (default: the model's positions)",
    applies: { mode: 'infer', engine: true },
    page: { label: 'max model length' },
  },
  maxNumBatchedTokens: {
    kind: 'int',
    limit: LIMITS.tokens,
    arg: '<n>',
    help: "vllm: tokens of the profiling forward pass (default: the release's, by GPU)",
    applies: { mode: 'infer', engine: 'vllm' },
    page: { label: 'max_num_batched_tokens' },
  },
  maxNumSeqs: {
    kind: 'int',
    limit: LIMITS.batch,
    arg: '<n>',
    help: "vllm: sequences scheduled at once (default: the release's, by GPU)",
    applies: { mode: 'infer', engine: 'vllm' },
    page: { label: 'max_num_seqs' },
  },
  engineVersion: {
    kind: 'text',
    arg: '<v>',
    pattern: /^\d{1,3}\.\d{1,3}(\.\d{1,3})?$/,
    example: 'a release such as 0.10 or 0.5.4',
    help: "the release the plan follows (default the newest gpumem follows): vllm/sglang, the engine's start-up; hf, the transformers release whose generate holds the previous step's cache (before 4.42) and the prompt's fp32 logits (before 4.45)",
    applies: { mode: 'infer' },
    page: { label: 'engine release' },
  },
  enforceEager: {
    kind: 'flag',
    help: 'vllm/sglang: no CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph)',
    applies: { mode: 'infer', engine: true },
    page: { label: 'no CUDA graphs' },
  },
  gpus: { kind: 'int', default: 1, limit: LIMITS.gpus, arg: '<n>', help: 'GPUs in all', page: { label: 'GPUs' } },
  nodes: { kind: 'int', default: 1, limit: LIMITS.gpus, arg: '<n>', help: 'nodes', page: { label: 'nodes' } },
  zero: {
    kind: 'int',
    default: 0,
    min: 0,
    limit: 3,
    arg: '<stage>',
    help: "ZeRO stage: DeepSpeed's ZeRO 1-3 (optimizer states, then gradients, then parameters sharded); with --framework megatron, 1 is its distributed optimizer",
    applies: TRAIN,
    page: { label: 'ZeRO stage' },
  },
  fsdp: {
    kind: 'scope',
    choices: ['1', '2'],
    bare: 'default',
    arg: '[version]',
    help: "FSDP full sharding: 2 (fully_shard, as torchtitan and torchtune apply it) or 1 (FullyShardedDataParallel, as HF Trainer / accelerate and LitGPT wrap it); bare: the framework's (LitGPT: 1, else 2)",
    applies: TRAIN,
    page: { label: 'FSDP' },
  },
  torchtitan: {
    kind: 'text',
    arg: '<date|release>',
    pattern: /^(\d{4}-\d{2}-\d{2}|v?\d+\.\d+\.\d+)$/,
    example: "a commit's date such as 2025-08-14, or a release such as 0.2.0",
    help: 'with --fsdp 2: the torchtitan commit (its date) or release whose apply_fsdp the run follows: before 2025-07-28 the embeddings and the output layer sit in the root unit; from 83e6941 (2025-07-28) the embeddings are their own unit and [norm, output] one unit kept from forward to backward (default: the root unit)',
    applies: TRAIN,
    page: { label: 'torchtitan commit (date) or release' },
  },
  tp: { kind: 'int', default: 1, limit: LIMITS.gpus, arg: '<n>', help: 'tensor parallel size', page: { label: 'tensor parallel' } },
  sp: { kind: 'flag', help: 'sequence parallelism (with --tp)', page: { label: 'sequence parallel' } },
  pp: { kind: 'int', default: 1, limit: LIMITS.gpus, arg: '<n>', help: 'pipeline parallel size', page: { label: 'pipeline parallel' } },
  inFlight: {
    kind: 'int',
    limit: LIMITS.steps,
    arg: '<n>',
    help: 'micro-batches in flight on the first stage (1F1B: --pp)',
    applies: TRAIN,
    page: { label: 'micro-batches in flight' },
  },
  ep: { kind: 'int', default: 1, limit: LIMITS.gpus, arg: '<n>', help: 'expert parallel size', page: { label: 'expert parallel' } },
  offload: {
    kind: 'choice',
    choices: ['none', 'optimizer', 'params'],
    default: 'none',
    help: 'offload to pinned host memory',
    applies: TRAIN,
    page: { label: 'offload' },
  },
  hostMemory: {
    kind: 'bytes',
    arg: '<size>',
    help: 'host memory available for offloading, e.g. 512GiB',
    page: { label: 'host memory, GiB (empty: not checked)' },
  },
  allocConf: {
    kind: 'text',
    arg: '<settings>',
    example: 'PYTORCH_CUDA_ALLOC_CONF settings such as expandable_segments:True',
    help: "PYTORCH_CUDA_ALLOC_CONF as the run sets it (expandable_segments, max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold): the step is replayed through the allocator so set (default: none, PyTorch's defaults)",
    page: { label: 'PYTORCH_CUDA_ALLOC_CONF' },
  },
  runLengths: {
    kind: 'text',
    arg: '<spec>',
    pattern: RUN_LENGTHS_PATTERN,
    example: "the samples' lengths (1024,877,2048) or lognormal:mean=<m>,sd=<s>,min=<a>,max=<b>,n=<count>[,over=drop]",
    help: "the whole run's sample lengths, in order or as a distribution: the reserved peak is the run's, every micro-batch (padded to its longest sample) replayed through one caching allocator, as max_memory_reserved() after trainer.train() reads it (default: one step at --seq)",
    applies: TRAIN,
    page: { label: 'whole run: sample lengths' },
  },
  fit: {
    kind: 'choice',
    choices: ['batch', 'seq', 'context', 'concurrency'],
    help: 'plan at the largest value that fits: batch or seq (training), context or concurrency (inference, serving)',
    page: { label: 'fit: the largest that fits' },
  },
  fragmentation: {
    kind: 'percent',
    arg: '<percent>',
    help: "a flat allowance for allocator fragmentation, in percent of the estimate (default: training replays the step through PyTorch's caching allocator; inference sets aside 5%)",
    page: { label: 'fragmentation allowance, % (empty: replayed)' },
  },
} as const satisfies Record<string, OptionSpec>;

/**
 * Contradictions between inputs that belong to no framework, engine or adapter module: each refuses a combination
 * of inputs a person set (given, or a switch turned on).
 */
export const RULES: ReadonlyArray<(i: PlanInputs, given: (k: InputName) => boolean) => string | undefined> = [
  // FSDP shards what ZeRO's stage 3 does: --zero 3 beside it says the same; another stage is DeepSpeed's
  (i, g) => (i.fsdp !== false && g('zero') && i.zero !== 3 ? `--fsdp and --zero ${i.zero} are two strategies: choose one` : undefined),
  (i) =>
    i.torchtitan !== undefined && (i.fsdp === false || i.fsdp === '1' || i.framework !== 'pytorch')
      ? "--torchtitan says how torchtitan's apply_fsdp wraps the model in FSDP2: give --fsdp (or --fsdp 2) with --framework pytorch"
      : undefined,
  // StaticCache came with transformers 4.38 (cache_utils.py)
  (i) =>
    i.mode === 'infer' && i.engine === 'hf' && i.kvCache === 'static' && !generateRelease(i.engineVersion).staticCache
      ? `--kv-cache static is transformers' StaticCache, which --engine-version ${i.engineVersion} does not have (4.38 on)`
      : undefined,
  (i, g) => (i.flashAttention && g('attention') && i.attention !== 'flash' ? `--flash-attention contradicts --attention ${i.attention}` : undefined),
  // the run's micro-batches are the samples as --seq and --batch keep them: a search over either would replay another run
  (i) =>
    i.runLengths !== undefined && (i.fit === 'seq' || i.fit === 'batch')
      ? `--run-lengths gives the run's samples at --seq ${i.seq} and --batch ${i.batch}: it cannot be searched with --fit ${i.fit}`
      : undefined,
  (i) =>
    i.context !== undefined && i.mode === 'infer' && i.context <= i.newTokens ? `--context ${i.context} must exceed --new-tokens ${i.newTokens}` : undefined,
  (i) =>
    i.optimizerInBackward && i.gradAccum > 1
      ? '--optimizer-in-backward steps each gradient as it is made: it cannot accumulate (--grad-accum 1), as torchtune refuses'
      : undefined,
  (i) => (i.optimizerInBackward && i.offload !== 'none' ? '--optimizer-in-backward steps on the GPU: it contradicts --offload' : undefined),
  (i) =>
    i.quantisedOutput && !BNB_WEIGHTS.includes(i.weights)
      ? `--quantised-output is for a bitsandbytes format (--weights ${BNB_WEIGHTS.join(', ')}); a ${i.weights} checkpoint keeps what it stores`
      : undefined,
  (i) =>
    i.awqVersion !== undefined && i.weights !== 'awq-int4'
      ? `--awq-version is the AutoAWQ release an AWQ GEMM checkpoint runs on: give --weights awq-int4, not ${i.weights}`
      : undefined,
  (i) =>
    i.computeDtype !== undefined && !BNB_4BIT.includes(i.weights)
      ? `--compute-dtype is bitsandbytes' bnb_4bit_compute_dtype: give --weights nf4 or fp4`
      : undefined,
  (i, g) => (g('cacheLen') && i.kvCache === 'dynamic' ? '--cache-len sizes a preallocated cache: give --kv-cache static or awq-fused' : undefined),
  // the weights may come from the checkpoint's quantization_config (checkpointInputs, which refuses the rest)
  (i, g) =>
    i.kvCache === 'awq-fused' && !i.weights.startsWith('awq-') && (g('weights') || i.weights !== SCHEMA.weights.default)
      ? `--kv-cache awq-fused is AutoAWQ's fused modules: give --weights awq-int4 or awq-int4-gemv, not ${i.weights}`
      : undefined,
  (i) =>
    i.kvCache !== 'dynamic' && (i.engine !== 'hf' || i.blockSize !== undefined)
      ? `--kv-cache ${i.kvCache} is Hugging Face generate's contiguous cache: it takes --engine hf and no --block-size`
      : undefined,
  (i) => {
    const prompt = i.context !== undefined ? i.context - i.newTokens : i.prompt;
    if (i.cacheLen === undefined || i.kvCache === 'dynamic') return undefined;
    // StaticCache cannot hold a token past max_cache_len; AutoAWQ's WindowedCache rolls during the decode steps but
    // writes the whole prompt at once (update_kv)
    if (i.kvCache === 'static' && i.cacheLen < prompt + i.newTokens)
      return `--cache-len ${i.cacheLen} is shorter than the ${prompt + i.newTokens} tokens of the run: a static cache holds no token past it`;
    if (i.kvCache === 'awq-fused' && i.cacheLen < prompt)
      return `--cache-len ${i.cacheLen} is shorter than the ${prompt}-token prompt: the fused cache takes the prompt at once`;
    return undefined;
  },
  (i) =>
    i.groupSize !== undefined && !GROUPED_WEIGHTS.includes(i.weights)
      ? `--group-size is for a grouped format (--weights ${GROUPED_WEIGHTS.join(', ')}), not ${i.weights}`
      : undefined,
];

/** The --weights formats bitsandbytes loads, and those quantised in groups. */
const BNB_4BIT: readonly string[] = ['nf4', 'nf4-dq', 'fp4', 'fp4-dq'];
const BNB_WEIGHTS: readonly string[] = [...BNB_4BIT, 'bnb-int8'];
const GROUPED_WEIGHTS: readonly string[] = ['nf4', 'nf4-dq', 'fp4', 'fp4-dq', 'gptq-int4', 'gptq-int4-exllama', 'awq-int4', 'awq-int4-gemv'];

export type InputName = keyof typeof SCHEMA;

/** An input's value as its kind gives it. */
type ValueOf<S> = S extends { kind: 'int' }
  ? number
  : S extends { kind: 'choice'; choices: readonly (infer C)[] }
    ? C
    : S extends { kind: 'flag' }
      ? boolean
      : S extends { kind: 'scope'; choices: readonly (infer C)[] }
        ? C | boolean
        : S extends { kind: 'text' }
          ? string
          : number;

/** Whether an input has a default (given or not) or may be left out. */
type HasDefault<S> = S extends { kind: 'flag' } | { kind: 'scope' } ? true : S extends { default: unknown } ? true : false;

/** The planner's inputs as a person gives them (the CLI's options, the page's controls). */
export type PlanInputs = {
  -readonly [K in InputName as HasDefault<(typeof SCHEMA)[K]> extends true ? K : never]: ValueOf<(typeof SCHEMA)[K]>;
} & {
  -readonly [K in InputName as HasDefault<(typeof SCHEMA)[K]> extends true ? never : K]?: ValueOf<(typeof SCHEMA)[K]> | undefined;
} & {
  /**
   * The inputs a person set (the CLI's options given on the command line, the page's visible controls): a
   * contradiction is refused only between inputs given, never with a default.
   */
  given?: readonly string[] | undefined;
};

/** The defaults: a stock PyTorch run on one GPU (and the engines' own defaults for serving). */
export const DEFAULT_INPUTS: PlanInputs = Object.fromEntries(
  Object.entries(SCHEMA as Record<string, OptionSpec>).flatMap(
    ([k, s]): Array<[string, unknown]> =>
      s.kind === 'flag' || s.kind === 'scope' ? [[k, false]] : 'default' in s && s.default !== undefined ? [[k, s.default]] : [],
  ),
) as unknown as PlanInputs;

/** The option an input is given by, as the CLI spells it (errors name it so on the page too). */
export const flagOf = (k: string): string => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

const fail = (msg: string): never => {
  throw new InvalidArgumentError(msg);
};

/** Checks one input's value against its kind. @throws InvalidArgumentError naming the option */
function checkValue(k: string, s: OptionSpec, v: unknown): void {
  const f = flagOf(k);
  switch (s.kind) {
    case 'int':
      if (typeof v !== 'number' || !Number.isFinite(v) || !Number.isInteger(v)) fail(`${f} must be a whole number, got ${String(v)}`);
      if ((v as number) < (s.min ?? 1)) fail(`${f} must be at least ${s.min ?? 1}, got ${String(v)}`);
      if ((v as number) > s.limit)
        fail(s.limit < 10 ? `${f} takes ${s.min ?? 1} to ${s.limit}, got ${String(v)}` : `${f} ${String(v)} is beyond any machine (at most ${s.limit})`);
      return;
    case 'choice':
      if (!s.choices.includes(String(v))) fail(`${f} takes ${s.choices.join(', ')}, got "${String(v)}"`);
      return;
    case 'scope':
      if (typeof v !== 'boolean' && !s.choices.includes(String(v))) fail(`${f} takes ${s.choices.join(' or ')} (or nothing: ${s.bare}), got "${String(v)}"`);
      return;
    case 'flag':
      if (typeof v !== 'boolean') fail(`${f} is a switch, got ${String(v)}`);
      return;
    case 'fraction': {
      const n = v as number;
      const ok = typeof n === 'number' && (s.zero ? n >= 0 : n > 0) && (s.below1 ? n < 1 : n <= 1);
      if (!ok) fail(`${f} must be a fraction ${s.zero ? 'from 0' : 'above 0'} and ${s.below1 ? 'below 1' : 'at most 1'}, got "${String(v)}"`);
      return;
    }
    case 'text':
      if (typeof v !== 'string' || (s.pattern && !s.pattern.test(v))) fail(`${f} takes ${s.example ?? 'text'}, got "${String(v)}"`);
      return;
    case 'bytes':
      if (typeof v !== 'number' || !(v >= 1)) fail(`${f} must be a size of at least 1 byte such as 512GiB, got ${String(v)}`);
      return;
    case 'percent':
      if (typeof v !== 'number' || !(v >= 0 && v <= 1)) fail(`${f} must be a percentage from 0 to 100, got ${typeof v === 'number' ? v * 100 : String(v)}`);
      return;
  }
}

/** True when an input is set to something other than nothing (a switch on, a scope chosen, a value given). */
const isSet = (v: unknown): boolean => v !== undefined && v !== false;

/** Why an input given does not apply to the run the other inputs describe (undefined: it applies). */
function misapplied(k: string, a: Applies, i: PlanInputs): string | undefined {
  const f = flagOf(k);
  if (a.mode === 'train' && i.mode !== 'train') return `${f} is for training: it contradicts --mode infer`;
  if (a.mode === 'infer' && i.mode !== 'infer') return `${f} is for --mode infer: it contradicts training`;
  if (a.lora && i.lora === undefined) return `${f} needs adapters: give --lora R`;
  if (a.engine === true && i.engine === 'hf') return `${f} is for --engine vllm or sglang`;
  if ((a.engine === 'vllm' || a.engine === 'sglang') && i.engine !== a.engine)
    return `${f} is ${a.engine === 'vllm' ? "vLLM's" : "SGLang's"}: give --engine ${a.engine}`;
  return undefined;
}

/**
 * Checks the inputs as the CLI and the page both take them: each value against its kind and limits, and each input
 * set (given, or a switch turned on) against the run the others describe.
 * @throws InvalidArgumentError naming the option and the reason.
 */
export function checkInputs(i: PlanInputs): void {
  const given = new Set(i.given ?? []);
  const values = i as unknown as Record<string, unknown>;
  for (const [k, s] of Object.entries(SCHEMA as Record<string, OptionSpec>)) {
    const v = values[k];
    if (v === undefined) continue;
    checkValue(k, s, v);
    const a = s.applies;
    // an input refused where it does not apply: where a person set it (a default applies where it can)
    if (a && (given.has(k) || (s.kind === 'flag' || s.kind === 'scope' ? isSet(v) : !('default' in s) && v !== undefined))) {
      const why = misapplied(k, a, i);
      if (why) fail(why);
    }
  }
  for (const rule of RULES) {
    const why = rule(i, (k) => given.has(k));
    if (why) fail(why);
  }
}
