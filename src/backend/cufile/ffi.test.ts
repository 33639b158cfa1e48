/**
 * The cuFile binding where it can be checked without a GPU: where libcufile is absent it answers why (never a
 * crash), and the descriptor struct is laid out as cufile.h lays it out (24 bytes, the handle union at 8) or refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadCuFile } from './ffi.js';

test('loadCuFile answers the library or, where libcufile or its driver is missing, the reason', () => {
  const cf = loadCuFile();
  if ('error' in cf) {
    assert.match(cf.error, /libcufile|cuFileDriverOpen|CUfileDescr_t/);
    assert.equal(loadCuFile(), cf, 'answered once per process');
  } else {
    assert.equal(typeof cf.read, 'function');
    assert.equal(typeof cf.gdsDriver, 'boolean');
  }
});

test('GPUMEM_CUFILE_PATH pointing at nothing is a reason, not a crash', async () => {
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import(${JSON.stringify(new URL('./ffi.js', import.meta.url).href)}).then((m) => console.log(JSON.stringify(m.loadCuFile())))`,
    ],
    { env: { ...process.env, GPUMEM_CUFILE_PATH: '/nonexistent/libcufile.so' }, encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim()) as { error?: string; library?: string };
  assert.ok(out.error?.includes('/nonexistent/libcufile.so') || out.library !== undefined, r.stdout);
});
