/**
 * Which commands start the transfer engine's threads when they open a runtime. The host backend has no such threads
 * (its copier copies on the JS thread), so this runs the real HIP backend against a fake libamdhip64 with two devices
 * (backend/hip/fake: built with cc here, no GPU involved), and counts the worker threads created through Node's
 * `worker_threads` diagnostics channel.
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, test } from 'node:test';
import { FakeRocm, haveCompiler, RELEASES, useFakeEnvironment } from '../backend/hip/fake/fake-rocm.js';
import { transferDefaults } from '../transfer/defaults.js';
import { withRuntime } from './context.js';
import { main } from './program.js';

const skip = haveCompiler() ? false : 'no C compiler (cc) to build the fake ROCm libraries';
const fake = skip ? undefined : new FakeRocm();
after(() => fake?.dispose());

/** Runs `fn` with the fake HIP install in the environment; answers how many worker threads were created meanwhile. */
async function workersDuring(fn: () => Promise<unknown>): Promise<number> {
  const { hip } = fake!.install('rocm-7.0.0', RELEASES['7.0']!);
  const restore = useFakeEnvironment({ GPUMEM_LIBAMDHIP64: hip, FAKE_HIP_DEVICES: '2' });
  let created = 0;
  const onWorker = (): void => {
    created++;
  };
  subscribe('worker_threads', onWorker);
  try {
    await fn();
  } finally {
    unsubscribe('worker_threads', onWorker);
    restore();
  }
  return created;
}

const quiet = { out: () => {}, err: () => {} };

test('info and monitor open a GPU runtime without the transfer threads; a command that transfers starts them at open', { skip }, async () => {
  let out = '';
  const info = await workersDuring(async () => {
    assert.equal(await main(['info', '--backend', 'hip', '--json'], { out: (s) => (out += s), err: () => {} }), 0);
  });
  assert.equal((JSON.parse(out) as { devices: unknown[] }).devices.length, 2, 'the fake install has two devices: a GPU runtime with devices opened');
  assert.equal(info, 0, 'gpumem info starts no transfer thread');
  const monitor = await workersDuring(async () => {
    assert.equal(await main(['monitor', '--backend', 'hip', '--once', '--json'], quiet), 0);
  });
  assert.equal(monitor, 0, 'gpumem monitor starts no transfer thread');
  // bench, report and load-weights open as a program does: the threads start as the runtime opens, before any transfer
  let ran = false;
  const transferring = await workersDuring(() =>
    withRuntime({ backend: 'hip', transfers: true }, quiet, (rt) => {
      assert.equal(rt.devices.length, 2);
      ran = true;
    }),
  );
  assert.ok(ran, 'the command ran');
  assert.equal(transferring, transferDefaults().threads, "the transfer engine's threads, one worker each");
  const plain = await workersDuring(() => withRuntime({ backend: 'hip' }, quiet, () => {}));
  assert.equal(plain, 0, 'without transfers: true, none');
});
