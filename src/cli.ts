#!/usr/bin/env node
/** The `gpumem` binary. */
import { main } from './cli/program.js';

// A reader that stops early (`gpumem monitor --json | head -1`) closes the pipe: stop quietly, as Unix tools do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`gpumem: ${String(e)}\n`);
    process.exitCode = 1;
  },
);
