/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import type { InferOptions, Parallelism, TrainOptions } from '../plan/estimate.js';
import { checkWritable, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePercent, parsePositive, parseSizeOption } from './options.js';

export function definePlan(program: Command, io: Io): void {
  program
    .command('plan')
    .description('LLM memory planner: what a model needs per GPU for training or inference, and where each part should live (loads no GPU library)')
    .requiredOption(
      '--model <name|config.json>',
      'a catalogue name (llama-2-7b, llama-3.1-70b, mixtral-8x7b, gpt-3-175b, deepseek-v3, ...) or a Hugging Face config.json',
    )
    .addOption(new Option('--mode <mode>', 'train or infer').choices(['train', 'infer']).default('train'))
    .addOption(new Option('--optimizer <name>').choices(['adamw', 'adam', 'sgd', 'adam8bit']).default('adamw'))
    .option('--fused-optimizer', 'a fused optimizer step (no parameter-sized temporaries)')
    .addOption(
      new Option('--precision <p>', 'fp32, amp-bf16 (fp32 weights, bf16 autocast), bf16 (16-bit weights, fp32 master), fp8')
        .choices(['fp32', 'amp-bf16', 'bf16', 'fp8'])
        .default('amp-bf16'),
    )
    .option('--batch <n>', 'micro-batch (train) or concurrent sequences (infer)', (v) => parsePositive(v, '--batch'), 1)
    .option('--seq <n>', 'sequence length (train)', (v) => parsePositive(v, '--seq'), 2048)
    .option('--grad-accum <n>', 'gradient accumulation steps', (v) => parsePositive(v, '--grad-accum'), 1)
    .addOption(new Option('--recompute <mode>', 'activation recomputation').choices(['none', 'selective', 'full']).default('none'))
    .option('--flash-attention', 'a fused attention kernel (no s x s matrix stored); default for inference')
    .addOption(
      new Option('--framework <f>', 'pytorch (eager, Hugging Face blocks; measured) or megatron (Korthikanti et al. 2022)')
        .choices(['pytorch', 'megatron'])
        .default('pytorch'),
    )
    .option('--prompt <n>', 'prompt tokens (infer)', (v) => parsePositive(v, '--prompt'), 512)
    .option('--new-tokens <n>', 'generated tokens (infer)', (v) => parsePositive(v, '--new-tokens'), 512)
    .option('--context <n>', 'total context (infer): sets the prompt to context - new tokens', (v) => parsePositive(v, '--context'))
    .addOption(new Option('--kv-dtype <t>').choices(['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']).default('bf16'))
    .option('--block-size <n>', 'paged KV cache block size in tokens', (v) => parsePositive(v, '--block-size'))
    .addOption(new Option('--weights <w>', 'inference weight format').choices(['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']).default('bf16'))
    .option('--gpus <n>', 'GPUs in all', (v) => parsePositive(v, '--gpus'), 1)
    .option('--nodes <n>', 'nodes', (v) => parsePositive(v, '--nodes'), 1)
    .addOption(new Option('--zero <stage>', 'ZeRO stage').choices(['0', '1', '2', '3']).default('0'))
    .option('--fsdp', 'FSDP full sharding (ZeRO-3)')
    .option('--tp <n>', 'tensor parallel size', (v) => parsePositive(v, '--tp'), 1)
    .option('--sp', 'sequence parallelism (with --tp)')
    .option('--pp <n>', 'pipeline parallel size', (v) => parsePositive(v, '--pp'), 1)
    .option('--in-flight <n>', 'micro-batches in flight on the first stage (1F1B: --pp)', (v) => parsePositive(v, '--in-flight'))
    .option('--ep <n>', 'expert parallel size', (v) => parsePositive(v, '--ep'), 1)
    .addOption(new Option('--offload <what>', 'offload to pinned host memory').choices(['none', 'optimizer', 'params']).default('none'))
    .option('--gpu <name>', 'GPU from the catalogue: h200, h100, a100-80, a100-40, l40s, rtx-4090, mi300x, mi325x, mi250x, mi210 (default h200)')
    .option('--from-bench <file>', 'a gpumem bench JSON: measured capacity and link bandwidth')
    .option('--host-memory <size>', 'host memory available for offloading, e.g. 512GiB', (v) => parseSizeOption(v, '--host-memory'))
    .option('--fragmentation <percent>', 'allowance for allocator fragmentation (default 5)', (v) => parsePercent(v, '--fragmentation'), 0.05)
    .option('--json', 'print JSON: { perGpu: {...}, capacityBytes, fits, placement: [...], suggestions: [...] }')
    .option('--html <file>', 'also write a self-contained HTML page with a stacked bar chart')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem plan --model llama-2-7b --mode train --precision bf16 --batch 4 --seq 4096 --gpus 8 --zero 3 --gpu h100\n  $ gpumem plan --model llama-3.1-70b --mode infer --batch 32 --context 8192 --kv-dtype fp8 --tp 4 --gpus 4 --gpu h200\n  $ gpumem plan --model ./config.json --mode train --recompute selective --flash-attention --json\n  $ gpumem plan --model mixtral-8x7b --mode infer --from-bench bench.json --html plan.html',
    )
    .action((opts: Record<string, unknown>) => runPlan(opts, io));
}

async function runPlan(opts: Record<string, unknown>, io: Io): Promise<void> {
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
      flashAttention: !!opts.flashAttention,
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
      flashAttention: true,
      parallel,
      fragmentation,
    };
  }
  const result = plan(model, options, machine);
  if (opts.html) {
    writeFileSync(String(opts.html), renderPlanHtml(result));
    io.err(`wrote ${String(opts.html)}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderPlanText(result)}\n`);
}
