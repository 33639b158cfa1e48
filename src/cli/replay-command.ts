/** `gpumem pool replay`: a recorded allocation trace replayed against pool configurations on a simulated device. */
import { Option, type Command } from 'commander';
import { progressText, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parseIntOption } from './options.js';
import { outputWidth } from '../render/width.js';

export interface ReplayCliOptions {
  json?: boolean;
  progress?: boolean;
  format: 'auto' | 'pytorch' | 'gpumem' | 'rmm';
  device?: number;
  config?: string[];
}

/** Files this big (bytes) get progress lines on stderr without --progress. */
const PROGRESS_FROM = 32 * 2 ** 20;

export function definePool(program: Command, io: Io): void {
  const pool = program.command('pool').description('memory pool tools');
  pool
    .command('replay')
    .description('replay a recorded allocation trace against pool configurations on a simulated device (no GPU needed)')
    .argument(
      // optional to commander: `--config NAME TRACE` gives the trace to the variadic option, and the action takes it back
      '[trace]',
      'a PyTorch memory snapshot with device_traces (the pickle _dump_snapshot writes, or JSON; gzip or not), a gpumem NDJSON log, or an RMM CSV log',
    )
    .option('--json', 'print JSON: { trace: {...}, configurations: [...] }')
    .addOption(new Option('--format <format>', 'trace format').choices(['auto', 'pytorch', 'gpumem', 'rmm']).default('auto'))
    .option('--device <n>', 'which device of a multi-device trace to replay', (v) => parseIntOption(v, '--device'))
    .option('--config <names...>', 'replay only these configurations (before or after the trace)')
    .option('--progress', 'report reading progress on stderr (default: files over 32 MiB)')
    .addHelpText(
      'after',
      `
Record a trace with PyTorch:
  torch.cuda.memory._record_memory_history(max_entries=400000)
  ... train a few steps ...
  torch.cuda.memory._dump_snapshot('snapshot.pickle')    # or json.dump(torch.cuda.memory._snapshot(), f)

Examples:
  $ gpumem pool replay snapshot.pickle
  $ gpumem pool replay snapshot.json.gz
  $ gpumem pool replay trace.ndjson --json
  $ gpumem pool replay rmm_log.csv --config gpumem gpumem-growable`,
    )
    .action((trace: string | undefined, opts: ReplayCliOptions) => runPoolReplay(trace, opts, io));
}

/**
 * The trace's path: the argument, or, when `--config` came first and took it, its last value when that names no
 * configuration. @throws UsageError when there is none, or no configuration is left.
 */
function traceArgument(trace: string | undefined, opts: ReplayCliOptions, known: readonly string[]): string {
  if (trace !== undefined) return trace;
  const last = opts.config?.at(-1);
  if (last === undefined || known.includes(last)) throw new UsageError('missing the trace: gpumem pool replay TRACE [--config NAME...]');
  opts.config = opts.config!.slice(0, -1);
  if (opts.config.length === 0) throw new UsageError(`--config: name a configuration before the trace ${last} (known: ${known.join(', ')})`);
  return last;
}

async function runPoolReplay(given: string | undefined, opts: ReplayCliOptions, io: Io): Promise<void> {
  const { readTrace } = await import('../formats/allocator-trace.js');
  const { replay, DEFAULT_CONFIGURATIONS } = await import('../replay/replay.js');
  const file = traceArgument(
    given,
    opts,
    DEFAULT_CONFIGURATIONS.map((c) => c.name),
  );
  const { renderReplay } = await import('../render/replay-text.js');
  let configs = DEFAULT_CONFIGURATIONS;
  if (opts.config) {
    const unknown = opts.config.filter((n) => !DEFAULT_CONFIGURATIONS.some((c) => c.name === n));
    if (unknown.length) throw new UsageError(`unknown configuration ${unknown.join(', ')} (known: ${DEFAULT_CONFIGURATIONS.map((c) => c.name).join(', ')})`);
    configs = DEFAULT_CONFIGURATIONS.filter((c) => opts.config!.includes(c.name));
  }
  io.err(`reading ${file}...\n`);
  let last = Date.now();
  const progress = (done: number, total: number): void => {
    const now = Date.now();
    if (now - last < 1000 || (total < PROGRESS_FROM && opts.progress !== true)) return;
    last = now;
    io.err(`reading ${file}: ${progressText(done, total)}\n`);
  };
  const trace = await readTrace(file, { format: opts.format, device: opts.device, progress });
  io.err(`replaying ${trace.events.length} events against ${configs.length} configuration(s)...\n`);
  const report = replay(trace, configs);
  io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderReplay(report, { width: outputWidth() })}\n`);
}
