#!/usr/bin/env node
/** The `gpumem` binary. */
import { main } from './cli/program.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`gpumem: ${String(e)}\n`);
    process.exitCode = 1;
  },
);
