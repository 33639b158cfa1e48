/** The commands' actions: open what they need, call the library, print. */
import { openRuntime, type Runtime } from '../memory/runtime.js';
import { UsageError } from './usage-error.js';
import { collectInfo, renderInfo } from './info.js';

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
  const { renderReplay } = await import('./pool-replay.js');
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
