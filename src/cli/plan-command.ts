/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { GPUS } from '../catalogue/gpus.js';
import { PRECISIONS } from '../plan/options.js';
import { DEFAULT_INPUTS, flagOf, type OptionSpec, type PlanInputs, SCHEMA } from '../plan/schema.js';
import { outputWidth } from '../render/width.js';
import { checkWritable, interruption, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePercent, parsePort, parseSizeOption } from './options.js';

/** A number for an option the planner's own checks bound (plan/schema.ts checkInputs: the page runs the same). */
function number(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a number, got "${v}"`);
  return n;
}

/** The commander option of one planner input, from its schema entry. */
function optionOf(key: string, spec: OptionSpec): Option {
  const flag = flagOf(key);
  const arg = 'arg' in spec && spec.arg ? ` ${spec.arg}` : spec.kind === 'choice' ? ' <choice>' : '';
  const help =
    key === 'precision'
      ? `${spec.help}: ${Object.entries(PRECISIONS)
          .map(([k, v]) => `${k}: ${v}`)
          .join('; ')}`
      : spec.help;
  const o = new Option(`${flag}${arg}`, help);
  switch (spec.kind) {
    case 'choice':
      o.choices(spec.choices);
      if (spec.default !== undefined) o.default(spec.default);
      break;
    case 'scope':
      o.choices(spec.choices);
      break;
    case 'int':
    case 'fraction':
      o.argParser((v) => number(v, flag));
      if (spec.kind === 'int' && spec.default !== undefined) o.default(spec.default);
      break;
    case 'bytes':
      o.argParser((v) => parseSizeOption(v, flag));
      break;
    case 'percent':
      o.argParser((v) => parsePercent(v, flag));
      break;
    default:
      break;
  }
  return o;
}

export function definePlan(program: Command, io: Io): void {
  const cmd = program
    .command('plan')
    .description('LLM memory planner: what a model needs per GPU for training or inference, and where each part should live (loads no GPU library)')
    .option(
      '--model <name|config.json|folder>',
      'a catalogue name (llama-2-7b, llama-3.1-70b, mixtral-8x7b, gemma-2-9b, qwen3-8b, deepseek-v3, ...), a Hugging Face config.json, or a model folder holding one',
    );
  for (const [key, spec] of Object.entries(SCHEMA as Record<string, OptionSpec>)) cmd.addOption(optionOf(key, spec));
  cmd
    .option('--gpu <name>', `GPU from the catalogue (${Object.keys(GPUS).join(', ')}; default h200)`)
    .option('--gpu-memory <size>', 'any other GPU: the memory its runtime reports, e.g. 24GiB (the host link is assumed)')
    .option('--from-bench <file>', 'a gpumem bench JSON: measured capacity and link bandwidth')
    .option('--json', 'print JSON: { perGpu: {...}, capacityBytes, fits, placement: [...], suggestions: [...] }')
    .option('--html <file>', 'also write the interactive page: the planner runs in it, every control re-plans (works offline)')
    .option('--serve', 'serve the interactive page over HTTP until Ctrl-C')
    .option('--port <n>', 'port for --serve (0 picks a free one)', (v) => parsePort(v), 0)
    .option('--host <address>', 'address for --serve to listen on', '127.0.0.1')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem plan --model llama-3-8b --lora 16 --lora-targets all-linear --base-weights nf4 --double-quant --recompute full\n  $ gpumem plan --model llama-2-7b --mode train --precision bf16 --batch 4 --seq 4096 --gpus 8 --zero 3 --gpu h100\n  $ gpumem plan --model llama-3.1-70b --mode infer --batch 32 --context 8192 --kv-dtype fp8 --tp 4 --gpus 4 --gpu h200\n  $ gpumem plan --model ./config.json --mode train --recompute selective --attention eager --json\n  $ gpumem plan --model mixtral-8x7b --mode infer --from-bench bench.json --html plan.html',
    )
    .action((opts: Record<string, unknown>, c: Command) => runPlan(opts, c, io));
}

async function runPlan(opts: Record<string, unknown>, cmd: Command, io: Io): Promise<void> {
  if (opts.model === undefined) throw new UsageError("required option '--model <name|config.json|folder>' not specified");
  checkWritable(opts.html as string | undefined, '--html');
  if (opts.serve && opts.json) throw new UsageError('choose --json or --serve');
  const { catalogueModel } = await import('../plan/catalogue.js');
  const { readConfigSource } = await import('../plan/config-file.js');
  const { parseConfigText } = await import('../plan/model-config.js');
  const { machineFromBench } = await import('../plan/bench-machine.js');
  const { machineFromCatalogue, machineFromMemory } = await import('../plan/plan.js');
  const { planAsked } = await import('../plan/search/ask.js');
  const { planOptionsFrom } = await import('../plan/inputs.js');
  const { renderPlanText } = await import('../render/plan-render.js');
  const { renderPlanPage } = await import('../render/plan-page.js');
  const modelArg = String(opts.model);
  // a config.json, or a Hugging Face model folder holding one
  const source = modelArg.endsWith('.json') || existsSync(modelArg) ? readConfigSource(modelArg) : undefined;
  const model = source ? parseConfigText(source.text, source.file, source.name) : catalogueModel(modelArg);
  if ([opts.gpu, opts.fromBench, opts.gpuMemory].filter((x) => x !== undefined).length > 1)
    throw new UsageError('give one of --gpu, --gpu-memory and --from-bench');
  const machine = opts.fromBench
    ? machineFromBench(String(opts.fromBench))
    : opts.gpuMemory !== undefined
      ? machineFromMemory(String(opts.gpuMemory))
      : machineFromCatalogue(String(opts.gpu ?? 'h200'));
  // commander's option names are the schema's input names; switches not given are off, the rest the defaults
  const values = Object.fromEntries(
    Object.entries(SCHEMA as Record<string, OptionSpec>).map(([k, spec]) => [
      k,
      spec.kind === 'flag' ? !!opts[k] : spec.kind === 'scope' ? (opts[k] ?? false) : opts[k],
    ]),
  );
  const inputs = {
    ...DEFAULT_INPUTS,
    ...Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)),
    // the options given on the command line: contradictions are refused between them, never with a default
    given: Object.keys(opts).filter((k) => cmd.getOptionValueSource(k) === 'cli'),
  } as PlanInputs;
  // refused before the machine is touched: the same validator the page runs
  planOptionsFrom(inputs);
  machine.hostMemoryBytes = inputs.hostMemory;
  // the suggestions' commands repeat the model and the machine as given
  const machineWords = opts.fromBench
    ? ['--from-bench', String(opts.fromBench)]
    : opts.gpuMemory !== undefined
      ? ['--gpu-memory', String(opts.gpuMemory)]
      : opts.gpu
        ? ['--gpu', String(opts.gpu)]
        : [];
  const result = planAsked(model, inputs, machine, ['gpumem', 'plan', '--model', modelArg, ...machineWords]);
  const page = (): string =>
    renderPlanPage({
      inputs,
      model: source ? { configText: source.text, name: model.name } : { catalogue: modelArg },
      gpu: opts.fromBench || opts.gpuMemory !== undefined ? { machine } : { catalogue: String(opts.gpu ?? 'h200') },
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
