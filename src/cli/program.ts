/**
 * The gpumem command line's program. It parses options and calls the library; each command's code is loaded only when that
 * command runs, so `gpumem plan` never loads a GPU library. Usage errors exit with code 2, failures with 1.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { ErrorCode, GpuError } from '../errors.js';
import { parseBytes } from '../units.js';
import type { MonitorCliOptions } from './monitor-command.js';
import { UsageError } from './usage-error.js';

export { UsageError };

const USAGE_CODES = new Set<string>([
  ErrorCode.INVALID_ARGUMENT,
  ErrorCode.INVALID_SIZE,
  ErrorCode.OUT_OF_BOUNDS,
  ErrorCode.BAD_INPUT,
  ErrorCode.UNSUPPORTED,
  ErrorCode.FOREIGN_ADDRESS,
  ErrorCode.WRONG_DEVICE,
]);

/** Exit code for an error: 2 for bad input or an impossible request, 1 for anything else. */
export function exitCodeFor(e: unknown): number {
  if (e instanceof GpuError && USAGE_CODES.has(e.code)) return 2;
  if (e instanceof UsageError) return 2;
  return 1;
}


function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

const backendOption = (): Option =>
  new Option('-b, --backend <name>', 'backend: auto (hip, then cuda, then host), cuda, hip or host; default $GPUMEM_BACKEND or auto').default(undefined);

/** Builds the program. `io` lets tests capture output. */
export function buildProgram(io: { out: (s: string) => void; err: (s: string) => void } = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }): Command {
  const program = new Command('gpumem');
  program
    .description('GPU memory management for AMD ROCm (HIP) and NVIDIA CUDA: what this machine\'s memory system is, what fits, and what to change.')
    .version(version(), '-V, --version')
    .showHelpAfterError('(run gpumem --help for usage)')
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .exitOverride();
  program.addHelpText(
    'after',
    `
Examples:
  $ gpumem report                    this machine's memory system, measured, and the strategy to use
  $ gpumem info                      devices, capabilities, libraries found
  $ gpumem bench --quick             the bandwidth and latency table
  $ gpumem info --json --backend cuda
  $ gpumem plan --model llama-3.1-8b --mode train --gpus 8 --zero 3   what fits, and where it lives
  $ gpumem pool replay snapshot.json.gz   replay a PyTorch allocator trace against pool configurations
  $ gpumem monitor --serve           live memory per GPU and process: web dashboard and Prometheus /metrics

Environment:
  GPUMEM_BACKEND                     default backend (auto, cuda, hip, host)
  GPUMEM_LIBCUDART, GPUMEM_LIBCUDA, GPUMEM_LIBNVRTC, GPUMEM_LIBNVML, GPUMEM_LIBAMDHIP64, GPUMEM_LIBHIPRTC, GPUMEM_LIBROCM_SMI
                                     exact paths of the vendor libraries
  GPUMEM_HOST_DEVICES, GPUMEM_HOST_DEVICE_BYTES
                                     logical devices and capacity of the host (CPU) backend
  GPUMEM_CACHE_DIR                   where compiled kernels are cached`,
  );

  program
    .command('info')
    .description('backend, runtime and driver versions, libraries, and each device\'s memory facts')
    .addOption(backendOption())
    .option('--json', 'print JSON: { backend, runtimeVersion, driverVersion, libraries, devices: [...] }')
    .addHelpText('after', '\nExamples:\n  $ gpumem info\n  $ gpumem info --json > info.json\n  $ GPUMEM_BACKEND=hip gpumem info')
    .action(async (opts: { backend?: string; json?: boolean }) => {
      const { runInfo } = await import('./commands.js');
      await runInfo(opts, io);
    });

  program
    .command('bench')
    .description("measure this machine's memory: copies of every kind and direction, peer copies, managed and zero-copy memory, STREAM, cache sweep, access patterns, latency, allocation")
    .addOption(backendOption())
    .option('--quick', 'fewer sizes and repeats (under 30 s on one GPU); default is the full run')
    .option('--device <n...>', 'devices to measure (default: all)', collectInts('--device'), undefined)
    .option('--only <test...>', 'run only these tests: copy, sm-copy, peer, managed, zero-copy, stream, cache, access, latency, alloc')
    .option('--max-size <size>', 'largest copy / working set, e.g. 64MiB (default 256 MiB quick, 1 GiB full)', (v) => parseSizeOption(v, '--max-size'))
    .option('--gated', "time device work only: each run waits behind a kernel until it is fully enqueued (default: time as the native yardstick does, submission included)")
    .option('--json', 'print JSON (schema gpumem.bench/1)')
    .option('--html <file>', 'also write a self-contained HTML page with charts')
    .addHelpText('after', '\nExamples:\n  $ gpumem bench --quick\n  $ gpumem bench --only copy stream --json > bench.json\n  $ gpumem bench --device 0 1 --only peer --html peer.html\n\nBandwidth is GB/s with GB = 1e9 bytes; each row says how bytes were counted. Ctrl-C stops and frees everything.')
    .action(async (opts: BenchCliOptions) => {
      const { runBenchCommand } = await import('./commands.js');
      await runBenchCommand(opts, io);
    });

  program
    .command('report')
    .description("the main job: this machine's memory system (info), a quick bench, and which memory to use for training, inference and preprocessing")
    .addOption(backendOption())
    .option('--device <n...>', 'devices to measure (default: all)', collectInts('--device'), undefined)
    .option('--max-size <size>', 'largest copy / working set of the quick bench (default 256 MiB)', (v) => parseSizeOption(v, '--max-size'))
    .option('--json', 'print JSON (schema gpumem.report/1): info, bench and advice')
    .option('--html <file>', 'also write a self-contained HTML page')
    .addHelpText('after', '\nExamples:\n  $ gpumem report\n  $ gpumem report --html report.html\n  $ gpumem report --json > report.json')
    .action(async (opts: BenchCliOptions) => {
      const { runReport } = await import('./commands.js');
      await runReport(opts, io);
    });

  program
    .command('plan')
    .description('LLM memory planner: what a model needs per GPU for training or inference, and where each part should live (loads no GPU library)')
    .requiredOption('--model <name|config.json>', 'a catalogue name (llama-2-7b, llama-3.1-70b, mixtral-8x7b, gpt-3-175b, deepseek-v3, ...) or a Hugging Face config.json')
    .addOption(new Option('--mode <mode>', 'train or infer').choices(['train', 'infer']).default('train'))
    .addOption(new Option('--optimizer <name>').choices(['adamw', 'adam', 'sgd', 'adam8bit']).default('adamw'))
    .option('--fused-optimizer', 'a fused optimizer step (no parameter-sized temporaries)')
    .addOption(new Option('--precision <p>', 'fp32, amp-bf16 (fp32 weights, bf16 autocast), bf16 (16-bit weights, fp32 master), fp8').choices(['fp32', 'amp-bf16', 'bf16', 'fp8']).default('amp-bf16'))
    .option('--batch <n>', 'micro-batch (train) or concurrent sequences (infer)', (v) => parsePositive(v, '--batch'), 1)
    .option('--seq <n>', 'sequence length (train)', (v) => parsePositive(v, '--seq'), 2048)
    .option('--grad-accum <n>', 'gradient accumulation steps', (v) => parsePositive(v, '--grad-accum'), 1)
    .addOption(new Option('--recompute <mode>', 'activation recomputation').choices(['none', 'selective', 'full']).default('none'))
    .option('--flash-attention', 'a fused attention kernel (no s x s matrix stored); default for inference')
    .addOption(new Option('--framework <f>', 'pytorch (eager, Hugging Face blocks; measured) or megatron (Korthikanti et al. 2022)').choices(['pytorch', 'megatron']).default('pytorch'))
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
    .action(async (opts: Record<string, unknown>) => {
      const { runPlan } = await import('./plan-command.js');
      await runPlan(opts, io);
    });

  program
    .command('analyze')
    .description('find memory problems in profiler and allocator traces: what to change and the time it saves (no GPU needed)')
    .argument('<files...>', 'traces from one run: PyTorch profiler JSON(.gz), rocprofv3 CSV files or JSON, rocprof stats CSV, nsys SQLite export, PyTorch memory snapshot, gpumem/RMM allocation log')
    .option('--json', 'print JSON (schema gpumem.analyze/1): { summary: {...}, findings: [ { rule, severity, count, bytes, timeNs, estimatedSavingNs, evidence, change } ] }')
    .option('--html <file>', 'also write a self-contained HTML page with a timeline of copies against kernels per stream')
    .option('--from-bench <file>', 'take the pinned copy rates for savings from a gpumem bench JSON (default: built in per device)')
    .addOption(new Option('--format <format>', 'trace format of every file').choices(['auto', 'kineto', 'rocprofv3-json', 'rocprof-csv', 'nsys-sqlite', 'memory-snapshot', 'alloc-log']).default('auto'))
    .option('--progress', 'report reading progress on stderr for every file (default: files over 32 MiB)')
    .addHelpText(
      'after',
      `
Record a trace:
  PyTorch:   with torch.profiler.profile(activities=[CPU, CUDA], profile_memory=True) as p: ...
             p.export_chrome_trace('trace.json')
  rocprofv3: rocprofv3 --runtime-trace --memory-allocation-trace -d out -- python train.py
  nsys:      nsys profile --trace=cuda,osrt python train.py && nsys export --type sqlite report1.nsys-rep

Examples:
  $ gpumem analyze trace.pt.trace.json.gz
  $ gpumem analyze out/*_memory_copy_trace.csv out/*_kernel_trace.csv out/*_hip_api_trace.csv
  $ gpumem analyze report1.sqlite --from-bench bench.json --html analysis.html
  $ gpumem analyze snapshot.json.gz --json`,
    )
    .action(async (files: string[], opts: Record<string, unknown>) => {
      const { runAnalyze } = await import('./analyze-command.js');
      await runAnalyze(files, opts, io);
    });

  program
    .command('monitor')
    .description('live memory per device and per process: a terminal view, JSON lines, Prometheus text, or a web dashboard with a Prometheus endpoint')
    .addOption(backendOption())
    .option('--device <n...>', 'devices to watch (default: all)', collectInts('--device'), undefined)
    .option('--interval <seconds>', 'seconds between samples, 0.1 to 3600', (v) => parseSeconds(v, '--interval'), 1)
    .option('--once', 'print one sample and exit')
    .option('--count <n>', 'stop after n samples', (v) => parsePositive(v, '--count'))
    .option('--json', 'one JSON sample per line (schema gpumem.monitor/1)')
    .option('--prometheus', "print samples in Prometheus' text format (e.g. for node_exporter's textfile collector)")
    .option('--serve', 'serve the web dashboard at / and Prometheus metrics at /metrics until Ctrl-C')
    .option('--port <n>', 'port for --serve (0 picks a free one)', (v) => parsePort(v), 9464)
    .option('--host <address>', 'address for --serve to listen on (0.0.0.0 to let other machines scrape it)', '127.0.0.1')
    .addHelpText(
      'after',
      `
Examples:
  $ gpumem monitor                      redraws every second until Ctrl-C
  $ gpumem monitor --once --json
  $ gpumem monitor --serve --host 0.0.0.0 --port 9464     dashboard at http://HOST:9464/, scrape /metrics

The figures and the per-process list come from NVML on NVIDIA and ROCm SMI on AMD (no context is created on the
GPUs); without those libraries from the runtime's memGetInfo, without a process list. Bytes are bytes; the terminal
view prints GiB = 2^30.`,
    )
    .action(async (opts: MonitorCliOptions) => {
      if ([opts.json, opts.prometheus, opts.serve].filter(Boolean).length > 1) throw new UsageError('choose one of --json, --prometheus and --serve');
      const { runMonitor } = await import('./monitor-command.js');
      await runMonitor(opts, io);
    });

  const pool = program.command('pool').description('memory pool tools');
  pool
    .command('replay')
    .description('replay a recorded allocation trace against pool configurations on a simulated device (no GPU needed)')
    .argument('<trace>', 'a PyTorch memory snapshot with device_traces (.json or .json.gz), a gpumem NDJSON log, or an RMM CSV log')
    .option('--json', 'print JSON: { trace: {...}, configurations: [...] }')
    .addOption(new Option('--format <format>', 'trace format').choices(['auto', 'pytorch', 'gpumem', 'rmm']).default('auto'))
    .option('--device <n>', 'which device of a multi-device trace to replay', (v) => parseIntOption(v, '--device'))
    .option('--config <names...>', 'replay only these configurations')
    .addHelpText(
      'after',
      `
Record a trace with PyTorch:
  torch.cuda.memory._record_memory_history(max_entries=400000)
  ... train a few steps ...
  json.dump(torch.cuda.memory._snapshot(), open('snapshot.json', 'w'))

Examples:
  $ gpumem pool replay snapshot.json.gz
  $ gpumem pool replay trace.ndjson --json
  $ gpumem pool replay rmm_log.csv --config gpumem gpumem-growable`,
    )
    .action(async (trace: string, opts: { json?: boolean; format: 'auto' | 'pytorch' | 'gpumem' | 'rmm'; device?: number; config?: string[] }) => {
      const { runPoolReplay } = await import('./commands.js');
      await runPoolReplay(trace, opts, io);
    });

  return program;
}

/** Options shared by bench and report. */
export interface BenchCliOptions {
  backend?: string;
  quick?: boolean;
  device?: number[];
  only?: string[];
  maxSize?: number;
  gated?: boolean;
  json?: boolean;
  html?: string;
}

/** A repeatable whole-number option. */
function collectInts(name: string): (v: string, prev: number[] | undefined) => number[] {
  return (v, prev) => [...(prev ?? []), parseIntOption(v, name)];
}

/** Parses a byte size ("64MiB", "1GB", "4096"), or throws a usage error naming the option. */
export function parseSizeOption(v: string, name: string): number {
  const n = parseBytes(v);
  if (n === undefined || n < 1) throw new InvalidArgumentError(`${name} must be a size of at least 1 byte such as 64MiB, got "${v}"`);
  return n;
}

/** A whole number of at least 1. */
export function parsePositive(v: string, name: string): number {
  const n = parseIntOption(v, name);
  if (n < 1) throw new InvalidArgumentError(`${name} must be at least 1, got ${v}`);
  return n;
}

/** Seconds from 0.1 to 3600. */
export function parseSeconds(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0.1 || n > 3600) throw new InvalidArgumentError(`${name} must be a number of seconds from 0.1 to 3600, got "${v}"`);
  return n;
}

/** A TCP port from 0 to 65535. */
export function parsePort(v: string): number {
  const n = parseIntOption(v, '--port');
  if (n > 65535) throw new InvalidArgumentError(`--port must be from 0 to 65535, got ${v}`);
  return n;
}

/** A percentage from 0 to 100, as a fraction. */
export function parsePercent(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || n > 100) throw new InvalidArgumentError(`${name} must be a percentage from 0 to 100, got "${v}"`);
  return n / 100;
}

/** Parses a whole number option, or throws a usage error naming the option. */
export function parseIntOption(v: string, name: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return n;
}

/** Runs the CLI with `argv` (without node and script) and answers the exit code. */
export async function main(argv: string[], io?: { out: (s: string) => void; err: (s: string) => void }): Promise<number> {
  const program = buildProgram(io);
  const err = io?.err ?? ((s: string) => process.stderr.write(s));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof Error && e.message === 'interrupted' && e.constructor.name === 'Interrupted') return 130;
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0;
      return 2;
    }
    err(`gpumem: ${e instanceof Error ? e.message : String(e)}\n`);
    if (process.env.GPUMEM_DEBUG && e instanceof Error && e.stack) err(`${e.stack}\n`);
    return exitCodeFor(e);
  }
}

