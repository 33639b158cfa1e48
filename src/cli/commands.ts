/** The commands' actions: open what they need, call the library, print. */
import { openRuntime, type Runtime } from '../memory/runtime.js';
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
