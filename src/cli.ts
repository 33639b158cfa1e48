#!/usr/bin/env node
/** The `gpumem` binary. */
import { main } from './cli/program.js';
import { exitOnSignals, receivedSignal, STOP_SIGNALS } from './cli/signals.js';

// A reader that stops early (`gpumem monitor --json | head -1`) closes the pipe: stop quietly, as Unix tools do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
}

// SIGINT and SIGTERM end every command within a second, with 130 or 143 (cli/signals.ts).
exitOnSignals((line) => process.stderr.write(line));

main(process.argv.slice(2)).then(
  (code) => {
    // a command that ended normally after a signal (a server stopped by it) was still stopped by it
    const signal = receivedSignal();
    process.exitCode = signal === undefined || code !== 0 ? code : STOP_SIGNALS[signal];
  },
  (e: unknown) => {
    process.stderr.write(`gpumem: ${String(e)}\n`);
    process.exitCode = 1;
  },
);
