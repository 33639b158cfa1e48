/**
 * The layer rule of docs/architecture.md, checked on the source: every run-time import (type-only imports are free)
 * goes to the same directory or to a lower layer, no two directories import each other through any path, and only
 * backend/**\/ffi.ts loads koffi.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const src = fileURLToPath(new URL('../src/', import.meta.url));

/** Each top-level directory (or file) of src/ and its layer: imports go to a lower number or stay in the directory. */
export const LAYERS: Record<string, number> = {
  'errors.ts': 0,
  'units.ts': 0,
  input: 0,
  net: 0,
  catalogue: 0,
  'allocator-model': 0,
  formats: 0,
  render: 0,
  backend: 1,
  kernels: 2,
  stream: 2,
  memory: 3,
  pool: 4,
  transfer: 5,
  collectives: 5,
  runtime: 6,
  plan: 7,
  analyze: 7,
  replay: 7,
  bench: 8,
  monitor: 8,
  report: 8,
  cli: 9,
  testing: 9,
  'cli.ts': 10,
  'index.ts': 10,
};

/**
 * Upward imports not yet removed, each with the change that removes it. This list must shrink to empty; a new upward
 * import is never added here.
 */
const PENDING: readonly string[] = [];

interface Edge {
  from: string;
  to: string;
  file: string;
  spec: string;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) sources(p, out);
    else if (/\.ts$/.test(e.name) && !/\.(test|case)\.ts$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const top = (file: string): string => (relative(src, file).split('/')[0] ?? '').replace(/\.js$/, '.ts');

/** Run-time imports: `import ... from`, `export ... from` and `import()`, without `import type` / `export type`. */
export function runtimeImports(text: string): string[] {
  const specs: string[] = [];
  const stmt = /^\s*(import|export)\s+(type\s+)?([^;]*?)\s+from\s+'([^']+)'/gms;
  for (const m of text.matchAll(stmt)) {
    if (m[2]) continue;
    const names = m[3] ?? '';
    // `import { type A, type B } from` carries no run-time import either
    const braces = /^\{([^}]*)\}$/.exec(names.trim());
    if (braces?.[1]?.split(',').every((n) => n.trim() === '' || n.trim().startsWith('type '))) continue;
    specs.push(m[4] ?? '');
  }
  for (const m of text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)) specs.push(m[1] ?? '');
  for (const m of text.matchAll(/^\s*import\s+'([^']+)'/gm)) specs.push(m[1] ?? '');
  return specs;
}

function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of sources(src)) {
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
    for (const spec of runtimeImports(text)) {
      if (!spec.startsWith('.')) continue;
      const target = normalize(join(dirname(file), spec));
      const from = top(file);
      const to = top(target);
      if (from !== to) out.push({ from, to, file: relative(src, file), spec });
    }
  }
  return out;
}

test('runtimeImports tells run-time imports from type-only ones', () => {
  const text = `import type { A } from './a.js';\nimport { type B, type C } from './b.js';\nimport { D, type E } from './d.js';\nexport { F } from './f.js';\nexport type { G } from './g.js';\nconst h = await import('./h.js');\nimport './i.js';`;
  assert.deepEqual(runtimeImports(text).sort(), ['./d.js', './f.js', './h.js', './i.js']);
});

test('every top-level directory of src/ has a layer', () => {
  const unknown = readdirSync(src).filter((n) => !n.endsWith('.test.ts') && !n.endsWith('.d.ts') && !(n in LAYERS));
  assert.deepEqual(unknown, [], 'add the new directory to LAYERS here and to docs/architecture.md');
});

test('imports only go down the layers', () => {
  const up = edges()
    .filter((e) => !PENDING.includes(e.file))
    .filter((e) => (LAYERS[e.to] ?? Number.POSITIVE_INFINITY) >= (LAYERS[e.from] ?? Number.NEGATIVE_INFINITY))
    .filter((e) => LAYERS[e.to] !== LAYERS[e.from])
    .map((e) => `${e.file} imports ${e.spec} (${e.from} is layer ${LAYERS[e.from]}, ${e.to} is layer ${LAYERS[e.to]})`);
  assert.deepEqual(up, []);
});

test('no two directories import each other, directly or through others', () => {
  const next = new Map<string, Set<string>>();
  for (const e of edges().filter((x) => !PENDING.includes(x.file))) {
    if (!next.has(e.from)) next.set(e.from, new Set());
    next.get(e.from)?.add(e.to);
  }
  const cycles: string[] = [];
  for (const start of next.keys()) {
    const seen = new Set<string>();
    const stack = [...(next.get(start) ?? [])];
    while (stack.length > 0) {
      const d = stack.pop() as string;
      if (d === start) {
        cycles.push(start);
        break;
      }
      if (seen.has(d)) continue;
      seen.add(d);
      stack.push(...(next.get(d) ?? []));
    }
  }
  assert.deepEqual(cycles, [], 'directories on an import cycle');
});

test('only backend/**/ffi.ts loads koffi', () => {
  const loaders = sources(src)
    .filter((f) => /['"]koffi['"]/.test(readFileSync(f, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '')))
    .map((f) => relative(src, f));
  assert.ok(loaders.length > 0, 'the koffi loader was found');
  assert.deepEqual(
    loaders.filter((f) => !/^backend\/(.+\/)?ffi\.ts$/.test(f)),
    [],
  );
});
