#!/usr/bin/env node
// Bundles the planner for the browser (dist/plan/browser.js -> dist/plan/browser.bundle.js, the global `gpumemPlan`),
// so that `gpumem plan --html` and `--serve` pages run the same code as the CLI. Run by `npm run build` after tsc.
import { buildSync } from 'esbuild';

const entry = new URL('../dist/plan/browser.js', import.meta.url).pathname;
const out = new URL('../dist/plan/browser.bundle.js', import.meta.url).pathname;
buildSync({
  entryPoints: [entry],
  outfile: out,
  bundle: true,
  format: 'iife',
  globalName: 'gpumemPlan',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  legalComments: 'none',
});
