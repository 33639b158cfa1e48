/**
 * SIGINT and SIGTERM for the whole CLI. A command's part that can stop cleanly (a bench, a load, a server) listens
 * through {@link onStopSignal}; the binary's handler ({@link exitOnSignals}) gives it a second to finish, marking
 * what it prints as interrupted, then ends the process. A signal that arrives while no part is listening (reading
 * a trace, replaying a snapshot) ends the process at once. Either way the exit code is 130 for SIGINT and 143 for
 * SIGTERM, temporary folders are removed on the way out (input/temp-folders.ts), and output files, which the
 * commands write in one synchronous call at the end, are either whole or not written.
 */

/** The signals that stop a command, and the exit code each gives (128 + the signal's number). */
export const STOP_SIGNALS = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof STOP_SIGNALS;

/** How long a part that stops cleanly is given before the process ends anyway (GPUMEM_STOP_GRACE_MS overrides it). */
function graceMs(): number {
  const v = Number(process.env.GPUMEM_STOP_GRACE_MS);
  return Number.isFinite(v) && v >= 0 ? v : 1000;
}

const listeners = new Set<(signal: StopSignal) => void>();
let received: StopSignal | undefined;

/**
 * Calls `listener` on SIGINT or SIGTERM until the returned function is called. In the binary the process ends a
 * second after the signal if the command has not ended by then.
 */
export function onStopSignal(listener: (signal: StopSignal) => void): () => void {
  const handlers = (Object.keys(STOP_SIGNALS) as StopSignal[]).map((s) => {
    const h = (): void => listener(s);
    process.on(s, h);
    return [s, h] as const;
  });
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
    for (const [s, h] of handlers) process.removeListener(s, h);
  };
}

/** The signal the binary received, if any: a command that then ends normally still exits with its code. */
export function receivedSignal(): StopSignal | undefined {
  return received;
}

/**
 * The binary's handler (cli.ts installs it once, before the command runs). `say` writes one line to stderr.
 */
export function exitOnSignals(say: (line: string) => void): void {
  for (const s of Object.keys(STOP_SIGNALS) as StopSignal[]) {
    process.on(s, () => {
      const first = received === undefined;
      received ??= s;
      // nothing stops on its own, or a second signal: end now
      if (listeners.size === 0 || !first) process.exit(STOP_SIGNALS[received]);
      const grace = graceMs();
      setTimeout(() => {
        say(`gpumem: still running ${grace / 1000} s after ${received}: exiting (the driver frees what was allocated)\n`);
        process.exit(STOP_SIGNALS[received!]);
      }, grace).unref();
    });
  }
}
