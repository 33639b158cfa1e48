/** The program's front door: --help's environment list, and a command group run without its subcommand. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LIBRARY_ENV } from '../backend/library-env.js';
import { runCli } from '../testing/harness.js';

test('--help lists every library override with the library it names', async () => {
  const { code, out } = await runCli(['--help']);
  assert.equal(code, 0);
  for (const l of LIBRARY_ENV) assert.match(out, new RegExp(`${l.envVar} +${l.library.replace(/[()+.]/g, '\\$&')}`));
  assert.match(out, /GPUMEM_LIBAMD_SMI/);
  assert.match(out, /GPUMEM_LIBRCCL/);
});

test('`gpumem pool` without a subcommand is a usage error that lists the subcommands', async () => {
  const r = await runCli(['pool']);
  assert.equal(r.code, 2);
  assert.match(r.out + r.err, /replay \[options\] \[trace\]/);
  assert.match(r.err, /needs one of the subcommands listed above/);
  assert.equal((await runCli(['pool', '--help'])).code, 0);
  assert.equal((await runCli(['help', 'pool'])).code, 0);
});
