/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { PlanInputs } from '../plan/inputs.js';
import { PRECISIONS, type Attention } from '../plan/options.js';
import { checkWritable, interruption, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePercent, parsePort, parsePositive, parseSizeOption } from './options.js';

/**
 * The largest values a plan takes: past them no GPU cluster could hold the result, and a typo (a batch of 10^12)
 * would print a figure in the billions of GiB instead of an error.
 */
const BATCH_LIMIT = 1 << 20;
const TOKENS_LIMIT = 1 << 24;
const GPUS_LIMIT = 1 << 20;
const STEPS_LIMIT = 1 << 16;

function fraction(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 1) throw new InvalidArgumentError(`${name} must be a fraction above 0 and at most 1, got "${v}"`);
  return n;
}

function bounded(v: string, name: string, limit: number): number {
  const n = parsePositive(v, name);
  if (n > limit) throw new InvalidArgumentError(`${name} ${v} is beyond any machine (at most ${limit})`);
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
    .addOption(new Option('--optimizer <name>').choices(['adamw', 'adam', 'sgd', 'adam8bit']).default('adamw'))
    .option('--fused-optimizer', 'a fused optimizer step (no parameter-sized temporaries)')
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
    .addOption(new Option('--recompute <mode>', 'activation recomputation').choices(['none', 'selective', 'full']).default('none'))
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
        'pytorch (eager, Hugging Face blocks; measured) or megatron (Megatron-LM: bf16 parameters, fp32 main gradients, the distributed optimizer with --zero 1, fused Adam, activations by Korthikanti et al. 2022)',
      )
        .choices(['pytorch', 'megatron'])
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
      new Option('--fragmentation <percent>', 'allowance for allocator fragmentation, in percent of the estimate')
        .argParser((v) => parsePercent(v, '--fragmentation'))
        .default(0.05, '5'),
    )
    .option('--json', 'print JSON: { perGpu: {...}, capacityBytes, fits, placement: [...], suggestions: [...] }')
    .option('--html <file>', 'also write the interactive page: the planner runs in it, every control re-plans (works offline)')
    .option('--serve', 'serve the interactive page over HTTP until Ctrl-C')
    .option('--port <n>', 'port for --serve (0 picks a free one)', (v) => parsePort(v), 0)
    .option('--host <address>', 'address for --serve to listen on', '127.0.0.1')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem plan --model llama-2-7b --mode train --precision bf16 --batch 4 --seq 4096 --gpus 8 --zero 3 --gpu h100\n  $ gpumem plan --model llama-3.1-70b --mode infer --batch 32 --context 8192 --kv-dtype fp8 --tp 4 --gpus 4 --gpu h200\n  $ gpumem plan --model ./config.json --mode train --recompute selective --attention eager --json\n  $ gpumem plan --model mixtral-8x7b --mode infer --from-bench bench.json --html plan.html',
    )
    .action((opts: Record<string, unknown>) => runPlan(opts, io));
}

async function runPlan(opts: Record<string, unknown>, io: Io): Promise<void> {
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
  if (opts.hostMemory !== undefined) machine.hostMemoryBytes = opts.hostMemory as number;
  // commander's option names are the inputs' names; the rest come from the defaults
  const inputs: PlanInputs = {
    ...DEFAULT_INPUTS,
    ...(Object.fromEntries(Object.entries(opts).filter(([k, v]) => k in DEFAULT_INPUTS || (v !== undefined && OPTIONAL_INPUTS.has(k)))) as Partial<PlanInputs>),
    zero: Number(opts.zero) as PlanInputs['zero'],
    fsdp: !!opts.fsdp,
    sp: !!opts.sp,
    fusedOptimizer: !!opts.fusedOptimizer,
    enforceEager: !!opts.enforceEager,
    attention: (opts.flashAttention ? 'flash' : opts.attention) as Attention,
  };
  const result = plan(model, planOptionsFrom(inputs), machine);
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
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderPlanText(result)}\n`);
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
  'maxNumBatchedTokens',
  'maxNumSeqs',
  'engineVersion',
]);
