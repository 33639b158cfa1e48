/**
 * The gpumem command line. Each command is defined in its own file and loads what it needs only when it runs, so
 * `gpumem plan` never loads a GPU library. Usage errors exit with code 2, interrupts with 130, failures with 1.
 */
import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import { defineAnalyze } from './analyze-command.js';
import { defineBench } from './bench-command.js';
import { inertIo, type Io } from './context.js';
import { exitCodeFor, Interrupted } from './errors.js';
import { LIBRARY_ENV } from '../backend/library-env.js';
import { fsReason } from '../input/fs-errors.js';
import { defineInfo } from './info-command.js';
import { defineLoadWeights } from './load-weights-command.js';
import { defineMonitor } from './monitor-command.js';
import { definePlan } from './plan-command.js';
import { definePool } from './replay-command.js';
import { defineReport } from './report-command.js';

export { exitCodeFor, UsageError } from './errors.js';

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

/** The help's lines for the library overrides, from the one list the backends' loaders are checked against. */
function environmentHelp(): string {
  const w = 34;
  return LIBRARY_ENV.map((l) => `  ${l.envVar.padEnd(w)} ${l.library}`).join('\n');
}

const STDIO: Io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };

/** Builds the program. `io` lets tests capture output; whatever it is, control characters in the text are escaped. */
export function buildProgram(given: Io = STDIO): Command {
  const io = inertIo(given);
  const program = new Command('gpumem');
  program
    .description("GPU memory management for AMD ROCm (HIP) and NVIDIA CUDA: what this machine's memory system is, what fits, and what to change.")
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
  $ gpumem load-weights ./model      a safetensors checkpoint to the GPU, checked and timed

Environment:
  GPUMEM_BACKEND                     default backend (auto, cuda, hip, host)
${environmentHelp()}
  GPUMEM_HOST_DEVICES, GPUMEM_HOST_DEVICE_BYTES
                                     logical devices and capacity of the host (CPU) backend
  GPUMEM_CACHE_DIR                   where compiled kernels are cached
  GPUMEM_ALLOWED_HOSTS               host names monitor --serve and plan --serve answer besides localhost
  GPUMEM_STOP_GRACE_MS               how long a command may take to stop cleanly after Ctrl-C or SIGTERM (1000)

Ctrl-C (SIGINT) and SIGTERM stop every command within a second: exit 130 and 143.`,
  );
  defineInfo(program, io);
  defineBench(program, io);
  defineReport(program, io);
  definePlan(program, io);
  defineAnalyze(program, io);
  defineMonitor(program, io);
  definePool(program, io);
  defineLoadWeights(program, io);
  return program;
}

/** Runs the CLI with `argv` (without node and script) and answers the exit code. */
export async function main(argv: string[], io?: Io): Promise<number> {
  const program = buildProgram(io);
  const err = inertIo(io ?? STDIO).err;
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof Interrupted) return e.exitCode;
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return 0;
      // a command group run without its subcommand (`gpumem pool`) prints its help as an error: a usage error
      if (e.code === 'commander.help' && e.exitCode !== 0) {
        err('gpumem: this command needs one of the subcommands listed above\n');
        return 2;
      }
      return e.code === 'commander.help' ? 0 : 2;
    }
    const errno = (e as NodeJS.ErrnoException | undefined)?.code;
    const path = (e as NodeJS.ErrnoException | undefined)?.path;
    // a file-system error names its path and its reason in words, as the checks before the work do
    const message = typeof errno === 'string' && typeof path === 'string' ? `${path}: ${fsReason(e)}` : e instanceof Error ? e.message : String(e);
    err(`gpumem: ${message}\n`);
    if (process.env.GPUMEM_DEBUG && e instanceof Error && e.stack) err(`${e.stack}\n`);
    return exitCodeFor(e);
  }
}
