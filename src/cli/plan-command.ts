/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { PRECISIONS, type Attention, type InferOptions, type Parallelism, type TrainOptions } from '../plan/options.js';
import { checkWritable, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePercent, parsePositive, parseSizeOption } from './options.js';

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
      '--model <name|config.json>',
      'a catalogue name (llama-2-7b, llama-3.1-70b, mixtral-8x7b, gpt-3-175b, deepseek-v3, ...) or a Hugging Face config.json',
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
    .option('--max-num-batched-tokens <n>', 'vllm: tokens of the profiling forward pass', (v) => bounded(v, '--max-num-batched-tokens', TOKENS_LIMIT), 8192)
    .option('--max-num-seqs <n>', 'vllm: sequences scheduled at once', (v) => bounded(v, '--max-num-seqs', BATCH_LIMIT), 256)
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
    .option('--html <file>', 'also write a self-contained HTML page with a stacked bar chart')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem plan --model llama-2-7b --mode train --precision bf16 --batch 4 --seq 4096 --gpus 8 --zero 3 --gpu h100\n  $ gpumem plan --model llama-3.1-70b --mode infer --batch 32 --context 8192 --kv-dtype fp8 --tp 4 --gpus 4 --gpu h200\n  $ gpumem plan --model ./config.json --mode train --recompute selective --attention eager --json\n  $ gpumem plan --model mixtral-8x7b --mode infer --from-bench bench.json --html plan.html',
    )
    .action((opts: Record<string, unknown>) => runPlan(opts, io));
}

async function runPlan(opts: Record<string, unknown>, io: Io): Promise<void> {
  if (opts.model === undefined) throw new UsageError("required option '--model <name|config.json>' not specified");
  checkWritable(opts.html as string | undefined, '--html');
  const { catalogueModel } = await import('../plan/catalogue.js');
  const { readConfigFile } = await import('../plan/model-config.js');
  const { machineFromBench, machineFromCatalogue, plan } = await import('../plan/plan.js');
  const { renderPlanHtml, renderPlanText } = await import('../render/plan-render.js');
  const modelArg = String(opts.model);
  const model = modelArg.endsWith('.json') || existsSync(modelArg) ? readConfigFile(modelArg) : catalogueModel(modelArg);
  if (opts.gpu && opts.fromBench) throw new UsageError('give --gpu or --from-bench, not both');
  const machine = opts.fromBench ? machineFromBench(String(opts.fromBench)) : machineFromCatalogue(String(opts.gpu ?? 'h200'));
  if (opts.hostMemory !== undefined) machine.hostMemoryBytes = opts.hostMemory as number;
  const zero = opts.fsdp ? 3 : (Number(opts.zero) as 0 | 1 | 2 | 3);
  const pp = opts.pp as number;
  const parallel: Parallelism = {
    gpus: opts.gpus as number,
    nodes: opts.nodes as number,
    zero,
    tp: opts.tp as number,
    sp: !!opts.sp,
    pp,
    ep: opts.ep as number,
    inFlight: (opts.inFlight as number | undefined) ?? pp,
  };
  const fragmentation = opts.fragmentation as number;
  const attention = (opts.flashAttention ? 'flash' : opts.attention) as Attention;
  let options: TrainOptions | InferOptions;
  if (opts.mode === 'train') {
    options = {
      mode: 'train',
      precision: opts.precision as TrainOptions['precision'],
      optimizer: opts.optimizer as TrainOptions['optimizer'],
      fusedOptimizer: !!opts.fusedOptimizer,
      batch: opts.batch as number,
      seq: opts.seq as number,
      gradAccum: opts.gradAccum as number,
      recompute: opts.recompute as TrainOptions['recompute'],
      attention,
      framework: opts.framework as TrainOptions['framework'],
      parallel,
      offload: opts.offload as TrainOptions['offload'],
      fragmentation,
    };
  } else {
    let prompt = opts.prompt as number;
    const newTokens = opts.newTokens as number;
    if (opts.context !== undefined) {
      const ctx = opts.context as number;
      if (ctx <= newTokens) throw new UsageError(`--context ${ctx} must exceed --new-tokens ${newTokens}`);
      prompt = ctx - newTokens;
    }
    options = {
      mode: 'infer',
      batch: opts.batch as number,
      prompt,
      newTokens,
      kvDtype: opts.kvDtype as InferOptions['kvDtype'],
      blockSize: opts.blockSize as number | undefined,
      weights: opts.weights as InferOptions['weights'],
      attention,
      engine: opts.engine as InferOptions['engine'],
      serve: {
        memoryFraction: (opts.engine === 'sglang' ? opts.memFractionStatic : opts.gpuMemoryUtilization) as number | undefined,
        maxModelLen: opts.maxModelLen as number | undefined,
        blockSize: opts.blockSize as number | undefined,
        maxNumBatchedTokens: opts.maxNumBatchedTokens as number,
        maxNumSeqs: opts.maxNumSeqs as number,
      },
      parallel,
      fragmentation,
    };
  }
  if (options.mode === 'train' && opts.engine !== 'hf') throw new UsageError('--engine is for --mode infer');
  if (opts.gpuMemoryUtilization !== undefined && opts.engine !== 'vllm') throw new UsageError("--gpu-memory-utilization is vLLM's: give --engine vllm");
  if (opts.memFractionStatic !== undefined && opts.engine !== 'sglang') throw new UsageError("--mem-fraction-static is SGLang's: give --engine sglang");
  const result = plan(model, options, machine);
  if (opts.html) {
    writeFileSync(String(opts.html), renderPlanHtml(result));
    io.err(`wrote ${String(opts.html)}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderPlanText(result)}\n`);
}
