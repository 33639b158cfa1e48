/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { LIMITS, type PlanInputs } from '../plan/inputs.js';
import { PRECISIONS, type Attention } from '../plan/options.js';
import { outputWidth } from '../render/width.js';
import { checkWritable, interruption, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePercent, parsePort, parseSizeOption } from './options.js';

// the same limits the page's inputs are checked against (plan/inputs.ts)
const BATCH_LIMIT = LIMITS.batch;
const TOKENS_LIMIT = LIMITS.tokens;
const GPUS_LIMIT = LIMITS.gpus;
const STEPS_LIMIT = LIMITS.steps;

function fraction(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 1) throw new InvalidArgumentError(`${name} must be a fraction above 0 and at most 1, got "${v}"`);
  return n;
}

/** A number for an option the planner's own checks bound (plan/inputs.ts checkInputs: the page runs the same). */
function bounded(v: string, name: string, _limit: number): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return n;
}

export function definePlan(program: Command, io: Io): void {
  program
    .command('plan')
    .description('LLM memory planner: what a model needs per GPU for training or inference, and where each part should live (loads no GPU library)')
    .option(
      '--model <name|config.json|folder>',
      'a catalogue name (llama-2-7b, llama-3.1-70b, mixtral-8x7b, gemma-2-9b, qwen3-8b, deepseek-v3, ...), a Hugging Face config.json, or a model folder holding one',
    )
    .addOption(new Option('--mode <mode>', 'train or infer').choices(['train', 'infer']).default('train'))
    .addOption(
      new Option(
        '--optimizer <name>',
        "adamw, adam (torch.optim, foreach by default), sgd (with momentum), adamw8bit (bitsandbytes / torchao 8-bit AdamW; adam8bit is the same), paged-adamw, paged-adamw8bit (bitsandbytes' paged optimizers: states in CUDA managed memory)",
      )
        .choices(['adamw', 'adam', 'sgd', 'adamw8bit', 'adam8bit', 'paged-adamw', 'paged-adamw8bit'])
        .default('adamw'),
    )
    .option('--fused-optimizer', 'a fused optimizer step (no parameter-sized temporaries)')
    .option('--optimizer-in-backward', "the optimizer step fused into the backward pass (torchtune's optimizer_in_bwd): no gradient outlives its step")
    .option('--lora <r>', 'LoRA adapters of rank r (PEFT): the base frozen, only the adapters train', (v) => bounded(v, '--lora', TOKENS_LIMIT))
    .option(
      '--lora-targets <list>',
      "module names as PEFT takes them (q_proj,v_proj) or all-linear (default: PEFT's default for the model: q_proj,v_proj for Llama-style models, c_attn for GPT-2)",
    )
    .addOption(
      new Option('--lora-dtype <t>', "the adapters' dtype (default: PEFT's, fp32 under a 16-bit base: autocast_adapter_dtype=True)").choices([
        'fp32',
        'bf16',
        'fp16',
      ]),
    )
    .option('--lora-dropout <p>', "PEFT's lora_dropout (default 0: no mask kept)", (v) => dropoutFraction(v))
    .option('--dora', "weight-decomposed LoRA (use_dora=True): a magnitude per output and each adapted layer's output kept")
    .addOption(
      new Option(
        '--base-weights <format>',
        "the frozen base under --lora: fp32, bf16, fp16, nf4 or fp4 (bitsandbytes 4-bit with its quant state; the other parameters in 16 bits as loaded), int8 (LLM.int8()); default the checkpoint's bf16",
      ).choices(['fp32', 'bf16', 'fp16', 'nf4', 'fp4', 'int8']),
    )
    .option('--double-quant', "bitsandbytes' bnb_4bit_use_double_quant: the 4-bit absmax in 8 bits (default off, as BitsAndBytesConfig)")
    .option(
      '--bnb-version <v>',
      'the bitsandbytes release a 4-bit base runs on (default a current one): before 0.43.2 its 4-bit matmul keeps each input for the backward pass (LitGPT pins 0.42)',
    )
    .option('--activation-offload', "torchtune's activation offloading: kept activations go to pinned host memory (about two layers stay)")
    .addOption(
      new Option(
        '--compile [what]',
        "torch.compile: all (the default when given bare) the blocks and the loss, as torch.compile(model) and torchtune; blocks: the transformer blocks only, the loss eager (torchtitan's apply_compile before it compiled the loss). Without a checkpoint, what its min-cut partitioner keeps per block; with --recompute full or op, the checkpoint decides, less what the backward never reads; the compiled cross-entropy keeps 16-bit logits",
      ).choices(['all', 'blocks']),
    )
    .addOption(
      new Option(
        '--loss <kind>',
        "standard: Hugging Face's cross-entropy on full fp32 logits; chunked: torchtune / LitGPT chunked cross-entropy; fused: Liger-style fused linear cross-entropy (no logits kept)",
      )
        .choices(['standard', 'chunked', 'fused'])
        .default('standard'),
    )
    .addOption(
      new Option(
        '--precision <p>',
        `which tensors hold which dtype (training): ${Object.entries(PRECISIONS)
          .map(([k, v]) => `${k}: ${v}`)
          .join('; ')}`,
      )
        .choices(Object.keys(PRECISIONS))
        .default('amp-bf16'),
    )
    .option('--batch <n>', 'micro-batch (train) or concurrent sequences (infer)', (v) => bounded(v, '--batch', BATCH_LIMIT), 1)
    .option('--seq <n>', 'sequence length (train)', (v) => bounded(v, '--seq', TOKENS_LIMIT), 2048)
    .option('--grad-accum <n>', 'gradient accumulation steps', (v) => bounded(v, '--grad-accum', STEPS_LIMIT), 1)
    .addOption(
      new Option(
        '--recompute <mode>',
        "activation recomputation: none; selective (attention); full (every layer: Hugging Face's gradient checkpointing); op (torchtitan's per-op selective checkpointing)",
      )
        .choices(['none', 'selective', 'full', 'op'])
        .default('none'),
    )
    .addOption(
      new Option(
        '--attention <kernel>',
        "sdpa: PyTorch's scaled_dot_product_attention as Hugging Face calls it by default (a fused kernel where one applies); eager: the math kernel, an s x s matrix kept per head; flash: a fused kernel always",
      )
        .choices(['sdpa', 'eager', 'flash'])
        .default('sdpa'),
    )
    .option('--flash-attention', 'the same as --attention flash')
    .addOption(
      new Option(
        '--framework <f>',
        "pytorch (eager, Hugging Face blocks; measured), megatron (Megatron-LM: bf16 parameters, fp32 main gradients, the distributed optimizer with --zero 1, fused Adam, activations by Korthikanti et al. 2022) or litgpt (LitGPT's fine-tuning scripts: its model code, its 128-token chunked loss, Lightning's bitsandbytes handling with the output layer quantised, bitsandbytes 0.42)",
      )
        .choices(['pytorch', 'megatron', 'litgpt'])
        .default('pytorch'),
    )
    .option('--prompt <n>', 'prompt tokens (infer)', (v) => bounded(v, '--prompt', TOKENS_LIMIT), 512)
    .option('--new-tokens <n>', 'generated tokens (infer)', (v) => bounded(v, '--new-tokens', TOKENS_LIMIT), 512)
    .option('--context <n>', 'total context (infer): sets the prompt to context - new tokens', (v) => bounded(v, '--context', TOKENS_LIMIT))
    .addOption(new Option('--kv-dtype <t>').choices(['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']).default('bf16'))
    .option('--block-size <n>', 'paged KV cache block size in tokens', (v) => bounded(v, '--block-size', TOKENS_LIMIT))
    .addOption(
      new Option('--weights <w>', 'inference weight format (int4: AWQ/GPTQ; int8, fp8: quantised checkpoints; embeddings and output layer stay 16-bit)')
        .choices(['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4'])
        .default('bf16'),
    )
    .addOption(
      new Option('--engine <e>', 'inference: hf (Hugging Face generate), vllm or sglang (the engine sizes its KV cache from the memory left)')
        .choices(['hf', 'vllm', 'sglang'])
        .default('hf'),
    )
    .option('--gpu-memory-utilization <f>', "vllm: share of the GPU it takes (default 0.92, vLLM's)", (v) => fraction(v, '--gpu-memory-utilization'))
    .option('--mem-fraction-static <f>', "sglang: share of the GPU for weights and KV cache (default: SGLang's by tensor-parallel size)", (v) =>
      fraction(v, '--mem-fraction-static'),
    )
    .option('--max-model-len <n>', "vllm/sglang: longest request in tokens (default: the model's positions)", (v) =>
      bounded(v, '--max-model-len', TOKENS_LIMIT),
    )
    .option('--max-num-batched-tokens <n>', "vllm: tokens of the profiling forward pass (default: the release's, by GPU)", (v) =>
      bounded(v, '--max-num-batched-tokens', TOKENS_LIMIT),
    )
    .option('--max-num-seqs <n>', "vllm: sequences scheduled at once (default: the release's, by GPU)", (v) => bounded(v, '--max-num-seqs', BATCH_LIMIT))
    .option(
      '--engine-version <v>',
      'vllm/sglang: the release whose start-up the plan follows (vLLM 0.6 to 0.27: V0 before 0.8, V1 from 0.8; SGLang 0.3 to 0.5.4; default the newest)',
    )
    .option('--enforce-eager', 'vllm/sglang: no CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph)')
    .option('--gpus <n>', 'GPUs in all', (v) => bounded(v, '--gpus', GPUS_LIMIT), 1)
    .option('--nodes <n>', 'nodes', (v) => bounded(v, '--nodes', GPUS_LIMIT), 1)
    .addOption(new Option('--zero <stage>', 'ZeRO stage').choices(['0', '1', '2', '3']).default('0'))
    .option('--fsdp', 'FSDP full sharding (ZeRO-3)')
    .option('--tp <n>', 'tensor parallel size', (v) => bounded(v, '--tp', GPUS_LIMIT), 1)
    .option('--sp', 'sequence parallelism (with --tp)')
    .option('--pp <n>', 'pipeline parallel size', (v) => bounded(v, '--pp', GPUS_LIMIT), 1)
    .option('--in-flight <n>', 'micro-batches in flight on the first stage (1F1B: --pp)', (v) => bounded(v, '--in-flight', STEPS_LIMIT))
    .option('--ep <n>', 'expert parallel size', (v) => bounded(v, '--ep', GPUS_LIMIT), 1)
    .addOption(new Option('--offload <what>', 'offload to pinned host memory').choices(['none', 'optimizer', 'params']).default('none'))
    .option('--gpu <name>', 'GPU from the catalogue: h200, h100, a100-80, a100-40, l40s, rtx-4090, mi300x, mi325x, mi250x, mi210 (default h200)')
    .option('--from-bench <file>', 'a gpumem bench JSON: measured capacity and link bandwidth')
    .option('--host-memory <size>', 'host memory available for offloading, e.g. 512GiB', (v) => parseSizeOption(v, '--host-memory'))
    .addOption(
      new Option(
        '--fragmentation <percent>',
        "a flat allowance for allocator fragmentation, in percent of the estimate (default: training replays the step through PyTorch's caching allocator; inference sets aside 5%)",
      ).argParser((v) => parsePercent(v, '--fragmentation')),
    )
    .option('--json', 'print JSON: { perGpu: {...}, capacityBytes, fits, placement: [...], suggestions: [...] }')
    .option('--html <file>', 'also write the interactive page: the planner runs in it, every control re-plans (works offline)')
    .option('--serve', 'serve the interactive page over HTTP until Ctrl-C')
    .option('--port <n>', 'port for --serve (0 picks a free one)', (v) => parsePort(v), 0)
    .option('--host <address>', 'address for --serve to listen on', '127.0.0.1')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem plan --model llama-3-8b --lora 16 --lora-targets all-linear --base-weights nf4 --double-quant --recompute full\n  $ gpumem plan --model llama-2-7b --mode train --precision bf16 --batch 4 --seq 4096 --gpus 8 --zero 3 --gpu h100\n  $ gpumem plan --model llama-3.1-70b --mode infer --batch 32 --context 8192 --kv-dtype fp8 --tp 4 --gpus 4 --gpu h200\n  $ gpumem plan --model ./config.json --mode train --recompute selective --attention eager --json\n  $ gpumem plan --model mixtral-8x7b --mode infer --from-bench bench.json --html plan.html',
    )
    .action((opts: Record<string, unknown>, cmd: Command) => runPlan(opts, cmd, io));
}

function dropoutFraction(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n >= 1)
    throw new InvalidArgumentError(`--lora-dropout must be a fraction from 0 to below 1, got "${v}"`);
  return n;
}

async function runPlan(opts: Record<string, unknown>, cmd: Command, io: Io): Promise<void> {
  if (opts.model === undefined) throw new UsageError("required option '--model <name|config.json|folder>' not specified");
  checkWritable(opts.html as string | undefined, '--html');
  if (opts.serve && opts.json) throw new UsageError('choose --json or --serve');
  const { catalogueModel } = await import('../plan/catalogue.js');
  const { readConfigSource } = await import('../plan/config-file.js');
  const { parseConfigText } = await import('../plan/model-config.js');
  const { machineFromBench } = await import('../plan/bench-machine.js');
  const { machineFromCatalogue, plan } = await import('../plan/plan.js');
  const { DEFAULT_INPUTS, planOptionsFrom } = await import('../plan/inputs.js');
  const { renderPlanText } = await import('../render/plan-render.js');
  const { renderPlanPage } = await import('../render/plan-page.js');
  const modelArg = String(opts.model);
  // a config.json, or a Hugging Face model folder holding one
  const source = modelArg.endsWith('.json') || existsSync(modelArg) ? readConfigSource(modelArg) : undefined;
  const model = source ? parseConfigText(source.text, source.file, source.name) : catalogueModel(modelArg);
  if (opts.gpu && opts.fromBench) throw new UsageError('give --gpu or --from-bench, not both');
  const machine = opts.fromBench ? machineFromBench(String(opts.fromBench)) : machineFromCatalogue(String(opts.gpu ?? 'h200'));
  // commander's option names are the inputs' names; the rest come from the defaults
  const inputs: PlanInputs = {
    ...DEFAULT_INPUTS,
    ...(Object.fromEntries(Object.entries(opts).filter(([k, v]) => k in DEFAULT_INPUTS || (v !== undefined && OPTIONAL_INPUTS.has(k)))) as Partial<PlanInputs>),
    zero: Number(opts.zero) as PlanInputs['zero'],
    fsdp: !!opts.fsdp,
    sp: !!opts.sp,
    fusedOptimizer: !!opts.fusedOptimizer,
    attention: opts.attention as Attention,
    flashAttention: !!opts.flashAttention,
    dora: !!opts.dora,
    doubleQuant: !!opts.doubleQuant,
    optimizerInBackward: !!opts.optimizerInBackward,
    activationOffload: !!opts.activationOffload,
    enforceEager: !!opts.enforceEager,
    compile: opts.compile === undefined ? false : (opts.compile as PlanInputs['compile']),
    // the options given on the command line: contradictions are refused between them, never with a default
    given: Object.keys(opts).filter((k) => cmd.getOptionValueSource(k) === 'cli'),
  };
  inputs.hostMemoryBytes = opts.hostMemory as number | undefined;
  const options = planOptionsFrom(inputs);
  machine.hostMemoryBytes = inputs.hostMemoryBytes;
  const result = plan(model, options, machine);
  const page = (): string =>
    renderPlanPage({
      inputs,
      model: source ? { configText: source.text, name: model.name } : { catalogue: modelArg },
      gpu: opts.fromBench ? { machine } : { catalogue: String(opts.gpu ?? 'h200') },
    });
  if (opts.html) {
    writeFileSync(String(opts.html), page());
    io.err(`wrote ${String(opts.html)}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderPlanText(result, { width: outputWidth() })}\n`);
  if (opts.serve) {
    const { servePage } = await import('../net/page-server.js');
    const stop = interruption();
    try {
      await using server = await servePage(page(), { host: opts.host as string, port: opts.port as number });
      io.err(`the interactive plan page is at ${server.url} (Ctrl-C stops)\n`);
      await stop.done;
    } finally {
      stop.release();
    }
  }
}

/** Inputs without a default: taken from the options only when given. */
const OPTIONAL_INPUTS = new Set([
  'context',
  'blockSize',
  'gpuMemoryUtilization',
  'memFractionStatic',
  'maxModelLen',
  'inFlight',
  'lora',
  'loraTargets',
  'loraDtype',
  'loraDropout',
  'baseWeights',
  'maxNumBatchedTokens',
  'maxNumSeqs',
  'engineVersion',
  'bnbVersion',
  'fragmentation',
]);
