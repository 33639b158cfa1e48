/** The host backend's environment: valid values taken, invalid ones refused with the variable, the value and the rule. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, InvalidArgumentError } from '../../errors.js';
import { main } from '../../cli/program.js';
import { hostOptionsFromEnv } from './host-backend.js';

test('GPUMEM_HOST_DEVICES and GPUMEM_HOST_DEVICE_BYTES: valid values are taken as written', () => {
  assert.deepEqual(hostOptionsFromEnv({ GPUMEM_HOST_DEVICES: '4', GPUMEM_HOST_DEVICE_BYTES: '2GiB' }), { devices: 4, deviceBytes: 2 * 2 ** 30 });
  assert.equal(hostOptionsFromEnv({}).devices, 1, 'unset: one device');
});

test('invalid host-backend variables are refused with the reason, never replaced by the default', async () => {
  for (const [k, v] of [
    ['GPUMEM_HOST_DEVICES', '0'],
    ['GPUMEM_HOST_DEVICES', '65'],
    ['GPUMEM_HOST_DEVICES', '2.5'],
    ['GPUMEM_HOST_DEVICES', 'two'],
    ['GPUMEM_HOST_DEVICES', ' '],
    ['GPUMEM_HOST_DEVICE_BYTES', 'lots'],
    ['GPUMEM_HOST_DEVICE_BYTES', '512KiB'],
    ['GPUMEM_HOST_DEVICE_BYTES', '-1GiB'],
  ] as const) {
    assert.throws(
      () => hostOptionsFromEnv({ [k]: v }),
      (e: unknown) => e instanceof InvalidArgumentError && e.code === ErrorCode.INVALID_ARGUMENT && e.message.startsWith(`${k}="${v}": `),
      `${k}=${v}`,
    );
  }
  // Through the CLI: exit 2 with the reason, nothing on stdout.
  const saved = process.env.GPUMEM_HOST_DEVICES;
  process.env.GPUMEM_HOST_DEVICES = '0';
  try {
    const out: string[] = [];
    const err: string[] = [];
    assert.equal(await main(['info', '--backend', 'host'], { out: (s) => out.push(s), err: (s) => err.push(s) }), 2);
    assert.deepEqual(out, []);
    assert.match(err.join(''), /GPUMEM_HOST_DEVICES="0": the host backend's device count must be a whole number from 1 to 64/);
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_HOST_DEVICES;
    else process.env.GPUMEM_HOST_DEVICES = saved;
  }
});
