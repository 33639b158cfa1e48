/** What the commands share: where output goes, a runtime opened for one command, Ctrl-C, and output files checked early. */
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Runtime } from '../runtime/runtime.js';
import { ErrorCode, isGpuError } from '../errors.js';
import { Interrupted, UsageError } from './errors.js';
import { onStopSignal, type StopSignal } from './signals.js';
import { fsReason } from '../input/fs-errors.js';
import { terminalText } from '../render/terminal-text.js';

/** Where a command writes: stdout and stderr, or a test's buffers. */
export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  /** Terminal control sequences of the command's own (the monitor's redraw), written as they are; never data. */
  control?: (s: string) => void;
}

/**
 * The same output with every control character of the text escaped (render/terminal-text.ts): what a command prints
 * quotes names from files, which must not act on the terminal. `control` passes the command's own sequences.
 */
export function inertIo(io: Io): Io {
  return { out: (s) => io.out(terminalText(s)), err: (s) => io.err(terminalText(s)), control: io.control ?? io.out };
}

/**
 * A reader's progress in words: the share of the content read (its inflated size for gzip), or, past a size that
 * was only a guess (a gzip trailer), the bytes read so far.
 */
export function progressText(done: number, total: number): string {
  const mib = (n: number): string => `${(n / 2 ** 20).toFixed(0)} MiB`;
  return done <= total ? `${((100 * done) / Math.max(1, total)).toFixed(0)}% of ${mib(total)}` : `${mib(done)} read`;
}

/** What a command does with the runtime it opens. */
export interface RuntimeUse {
  /**
   * The command moves data between host and device through the transfer engine (bench, report, load-weights): the
   * engine's host threads start in the background as the runtime opens, as a program's would. Default false: a
   * command that never transfers (info, monitor) opens without them (up to 12 worker threads on a GPU backend).
   */
  transfers?: boolean | undefined;
}

/**
 * Opens a runtime for a command on `opts.backend`, prints the backend notice on stderr, and disposes it afterwards.
 * @throws InvalidArgumentError for an unknown backend name; BackendUnavailableError when a requested backend cannot
 * open; whatever `fn` throws.
 */
export async function withRuntime<T>(opts: { backend?: string | undefined } & RuntimeUse, io: Io, fn: (rt: Runtime) => Promise<T> | T): Promise<T> {
  const { openRuntime } = await import('../runtime/runtime.js');
  const rt = openRuntime({ backend: opts.backend, warmTransfers: opts.transfers ?? false });
  if (rt.selection.notice) io.err(`${rt.selection.notice}\n`);
  try {
    return await fn(rt);
  } finally {
    rt[Symbol.dispose]();
  }
}

/**
 * Runs `fn` with an AbortSignal that SIGINT (Ctrl-C) or SIGTERM fires. `isAbort` tells the error the work throws once
 * it has stopped; such a run, or one that returns after the signal (a bench that prints the rows it finished, marked
 * interrupted), reports that everything was freed and ends with {@link Interrupted} (exit code 130, or 143 for SIGTERM).
 */
export async function interruptible<T>(io: Io, isAbort: (e: unknown) => boolean, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  let stoppedBy: StopSignal | undefined;
  const release = onStopSignal((s) => {
    if (stoppedBy) return;
    stoppedBy = s;
    io.err(`\n${s === 'SIGINT' ? 'interrupt' : 'SIGTERM'}: stopping after the current measurement and freeing what was allocated...\n`);
    ac.abort();
  });
  try {
    const out = await fn(ac.signal);
    if (stoppedBy) {
      io.err('interrupted: every allocation was freed\n');
      throw new Interrupted(stoppedBy);
    }
    return out;
  } catch (e) {
    if (e instanceof Interrupted) throw stoppedBy ? new Interrupted(stoppedBy) : e;
    if (isAbort(e) || (stoppedBy && ac.signal.aborted && isGpuError(e, ErrorCode.ABORTED))) {
      io.err('interrupted: every allocation was freed\n');
      throw new Interrupted(stoppedBy ?? 'SIGINT');
    }
    throw e;
  } finally {
    release();
  }
}

/**
 * Checks before any work that `file` can be written (its folder exists and is writable, and it is not a folder
 * itself), so that a bad `--html` path fails at once with exit code 2 rather than after a long run.
 * @throws UsageError naming the option and the reason.
 */
export function checkWritable(file: string | undefined, option: string): void {
  if (file === undefined) return;
  const path = resolve(file);
  const dir = dirname(path);
  try {
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
    accessSync(dir, constants.W_OK);
  } catch (e) {
    throw new UsageError(`${option} ${file}: cannot write there (${fsReason(e)})`);
  }
  let isDir = false;
  try {
    isDir = statSync(path).isDirectory();
    accessSync(path, constants.W_OK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new UsageError(`${option} ${file}: cannot write it (${fsReason(e)})`);
  }
  if (isDir) throw new UsageError(`${option} ${file}: is a folder; give a file name`);
}

/** Aborts on SIGINT or SIGTERM; `release()` removes the listeners. */
export function interruption(): { signal: AbortSignal; done: Promise<void>; abort: () => void; release: () => void } {
  const ac = new AbortController();
  const finish = (): void => ac.abort();
  const release = onStopSignal(finish);
  const done = new Promise<void>((resolve) => ac.signal.addEventListener('abort', () => resolve(), { once: true }));
  return { signal: ac.signal, done, abort: finish, release };
}
