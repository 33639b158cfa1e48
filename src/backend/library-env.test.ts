/** Every library override a backend's loader reads is in the one list the CLI's help prints (cli/program.test.ts), and no other is. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LIBRARY_ENV } from './library-env.js';

/** The GPUMEM_LIB* names in the backends' compiled code (tests and fakes left out). */
function readByLoaders(): Set<string> {
  const root = fileURLToPath(new URL('.', import.meta.url));
  const names = new Set<string>();
  for (const f of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
    if (!f.endsWith('.js') || /\.test\.js$|fake|library-env/.test(f)) continue;
    for (const m of readFileSync(join(root, f), 'utf8').matchAll(/envVar: '(GPUMEM_LIB\w+)'|\{ envVar: "(GPUMEM_LIB\w+)"/g)) names.add(m[1] ?? m[2] ?? '');
  }
  return names;
}

test('the list of library overrides is the set the loaders read', () => {
  const read = readByLoaders();
  assert.ok(read.size >= 8, [...read].join(' '));
  assert.deepEqual([...read].sort(), LIBRARY_ENV.map((l) => l.envVar).sort());
});
