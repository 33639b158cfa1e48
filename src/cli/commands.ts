/** The commands' actions: open what they need, call the library, print. */
import { writeFileSync } from 'node:fs';
import { openRuntime, type Runtime } from '../memory/runtime.js';
import type { BenchCliOptions } from './program.js';
import { UsageError } from './usage-error.js';
import { collectInfo } from '../report/info.js';
import { renderInfo } from '../report/info-text.js';

export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
}

/** Opens a runtime for a command, prints the backend notice on stderr, and disposes it afterwards. */
export async function withRuntime<T>(opts: { backend?: string | undefined }, io: Io, fn: (rt: Runtime) => Promise<T> | T): Promise<T> {
  const rt = openRuntime({ backend: opts.backend });
  if (rt.selection.notice) io.err(`${rt.selection.notice}\n`);
  try {
    return await fn(rt);
  } finally {
    rt[Symbol.dispose]();
  }
}

export async function runInfo(opts: { backend?: string; json?: boolean }, io: Io): Promise<void> {
  await withRuntime(opts, io, (rt) => {
    const report = collectInfo(rt);
    io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderInfo(report)}\n`);
  });
}

export async function runPoolReplay(
  file: string,
  opts: { json?: boolean; format: 'auto' | 'pytorch' | 'gpumem' | 'rmm'; device?: number; config?: string[] },
  io: Io,
): Promise<void> {
  const { readTrace } = await import('../pool/replay/read-trace.js');
  const { replay, DEFAULT_CONFIGURATIONS } = await import('../pool/replay/replay.js');
  const { renderReplay } = await import('../report/replay-text.js');
  let configs = DEFAULT_CONFIGURATIONS;
  if (opts.config) {
    const unknown = opts.config.filter((n) => !DEFAULT_CONFIGURATIONS.some((c) => c.name === n));
    if (unknown.length) throw new UsageError(`unknown configuration ${unknown.join(', ')} (known: ${DEFAULT_CONFIGURATIONS.map((c) => c.name).join(', ')})`);
    configs = DEFAULT_CONFIGURATIONS.filter((c) => opts.config!.includes(c.name));
  }
  io.err(`reading ${file}...\n`);
  const trace = await readTrace(file, { format: opts.format, device: opts.device });
  io.err(`replaying ${trace.events.length} events against ${configs.length} configuration(s)...\n`);
  const report = replay(trace, configs);
  io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderReplay(report)}\n`);
}

/** Runs `fn` with an AbortSignal that Ctrl-C fires; an interrupted run exits 130 after everything was freed. */
async function interruptible<T>(io: Io, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const onInt = (): void => {
    io.err('\ninterrupt: stopping after the current measurement and freeing what was allocated...\n');
    ac.abort();
  };
  process.once('SIGINT', onInt);
  try {
    return await fn(ac.signal);
  } catch (e) {
    const { BenchAborted } = await import('../bench/context.js');
    if (e instanceof BenchAborted) {
      io.err('interrupted: every allocation was freed\n');
      process.exitCode = 130;
      throw new Interrupted();
    }
    throw e;
  } finally {
    process.removeListener('SIGINT', onInt);
  }
}

/** Thrown after an interrupt has been reported; the CLI exits 130. */
export class Interrupted extends Error {
  constructor() {
    super('interrupted');
  }
}

export async function runBenchCommand(opts: BenchCliOptions, io: Io): Promise<void> {
  const { runBench } = await import('../bench/run-bench.js');
  const { renderBench } = await import('../report/bench-text.js');
  await withRuntime(opts, io, (rt) =>
    interruptible(io, async (signal) => {
      const report = await runBench(rt, { quick: !!opts.quick, devices: opts.device, only: opts.only, maxBytes: opts.maxSize, gated: opts.gated, signal, progress: (m) => io.err(`${m}\n`) });
      if (opts.html) {
        const { benchHtml } = await import('../report/bench-html.js');
        writeFileSync(opts.html, benchHtml(report));
        io.err(`wrote ${opts.html}\n`);
      }
      io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderBench(report)}\n`);
    }),
  );
}

export async function runReport(opts: BenchCliOptions, io: Io): Promise<void> {
  const { buildReport } = await import('../report/report.js');
  const { renderReportText, renderReportHtml } = await import('../report/report-render.js');
  await withRuntime(opts, io, (rt) =>
    interruptible(io, async (signal) => {
      const report = await buildReport(rt, { devices: opts.device, maxBytes: opts.maxSize, signal, progress: (m) => io.err(`${m}\n`) });
      if (opts.html) {
        writeFileSync(opts.html, renderReportHtml(report));
        io.err(`wrote ${opts.html}\n`);
      }
      io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderReportText(report)}\n`);
    }),
  );
}
