/**
 * On machines without a GPU (CI among them) the CUDA and HIP libraries still load for real and must answer
 * "no device" cleanly. GPUMEM_EXPECT_HIP=1 / GPUMEM_EXPECT_CUDA=1 turn a missing library into a failure.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackendUnavailableError, ErrorCode, GpuError } from '../errors.js';
import { openRuntime } from '../runtime/runtime.js';
import { main } from '../cli/program.js';
import { openBackend } from './select.js';

for (const name of ['cuda', 'hip'] as const) {
  const expect = process.env[`GPUMEM_EXPECT_${name.toUpperCase()}`] === '1';
  let loaded: ReturnType<typeof openRuntime> | undefined;
  let loadError: unknown;
  try {
    loaded = openRuntime({ backend: name });
  } catch (e) {
    loadError = e;
  }
  const hasDevice = (loaded?.devices.length ?? 0) > 0;
  const skip = hasDevice ? 'a device is present: the conformance suite covers it' : !loaded && !expect ? `the ${name} library is not installed here` : false;
  test(`${name}: the library loads and answers "no device" cleanly`, { skip }, async () => {
    assert.ok(loaded, `the ${name} library did not load: ${(loadError as Error)?.message}`);
    using rt = loaded;
    assert.equal(rt.backend.name, name);
    assert.equal(rt.devices.length, 0);
    assert.match(rt.backend.noDeviceReason() ?? '', /NoDevice|InsufficientDriver|NotInitialized/);
    const driver = rt.backend.libraries.find((l) => l.role === 'driver');
    if (name === 'cuda' && driver && !driver.loaded) {
      // The toolkit without a driver: "insufficient driver" would read as a broken driver; say that none is installed.
      assert.match(rt.backend.noDeviceReason() ?? '', /^no NVIDIA driver is installed \(libcuda\.so\.1 was not found/);
    }
    const runtime = rt.backend.libraries.find((l) => l.role === 'runtime');
    assert.ok(runtime?.loaded && runtime.path, 'the runtime library has a resolved path');
    assert.ok(rt.backend.runtimeVersion, 'the runtime reports its version');
    // The management library (NVML, ROCm SMI) is listed, loaded or not; CI installs ROCm SMI beside HIP.
    const management = rt.backend.libraries.find((l) => l.role === 'management');
    assert.ok(management, 'the management library is listed');
    if (name === 'hip' && expect) assert.ok(management.loaded && management.path, `ROCm SMI loads: ${management.error ?? ''}`);
    if (name === 'hip') {
      // HIP declares hipHostMallocWriteCombined for CUDA source compatibility only: not a capability.
      assert.equal(rt.backend.capabilities.writeCombined, false);
      assert.ok(rt.backend.installRoot, 'the install the libraries came from is named');
    }
    assert.throws(
      () => rt.device(0),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.INVALID_ARGUMENT && /no device/.test(e.message),
    );
    assert.throws(
      () => rt.allocPinned(4096),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.INVALID_ARGUMENT,
    );
    const out: string[] = [];
    const code = await main(['info', '--json', '--backend', name], { out: (s) => out.push(s), err: () => {} });
    assert.equal(code, 0);
    const json = JSON.parse(out.join('')) as { backend: string; devices: unknown[]; links: unknown[]; noDevice: string; runtimeVersion: string };
    assert.equal(json.backend, name);
    assert.deepEqual(json.devices, []);
    assert.deepEqual(json.links, [], 'no device, no links');
    assert.match(json.noDevice, /NoDevice|InsufficientDriver/);
  });
}

test('a library path that does not exist is a BackendUnavailableError naming the file and the variable', () => {
  const saved = process.env.GPUMEM_LIBAMDHIP64;
  process.env.GPUMEM_LIBAMDHIP64 = '/nonexistent/libamdhip64.so.6';
  try {
    assert.throws(
      () => openBackend({ backend: 'hip' }),
      (e: unknown) => e instanceof BackendUnavailableError && e.envVar === 'GPUMEM_LIBAMDHIP64' && /nonexistent\/libamdhip64/.test(e.message),
    );
    const sel = openBackend({ backend: 'auto' });
    assert.notEqual(sel.backend.name, 'hip');
    assert.match(sel.attempts.find((a) => a.name === 'hip')?.error ?? '', /GPUMEM_LIBAMDHIP64/);
    sel.backend.dispose();
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_LIBAMDHIP64;
    else process.env.GPUMEM_LIBAMDHIP64 = saved;
  }
});

test('a file that is not a library is a BackendUnavailableError too, not a crash', () => {
  const saved = process.env.GPUMEM_LIBCUDART;
  process.env.GPUMEM_LIBCUDART = new URL(import.meta.url).pathname;
  try {
    assert.throws(
      () => openBackend({ backend: 'cuda' }),
      (e: unknown) => e instanceof BackendUnavailableError && e.envVar === 'GPUMEM_LIBCUDART',
    );
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_LIBCUDART;
    else process.env.GPUMEM_LIBCUDART = saved;
  }
});

test('an unknown backend name is refused', () => {
  assert.throws(
    () => openBackend({ backend: 'metal' }),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.INVALID_ARGUMENT,
  );
});

test('management-library lists: the buffer grows while the library answers "insufficient size", and a failure is undefined', async () => {
  const { readRecords } = await import('./native/management.js');
  const codes = { success: 0, insufficient: 7 };
  const calls: number[] = [];
  // A library holding 150 four-byte records (their index), answering "too small" with the count it needs.
  const list = readRecords(
    (buf, count) => {
      calls.push(count[0]!);
      if (count[0]! < 150) {
        count[0] = 150;
        return 7;
      }
      for (let i = 0; i < 150; i++) buf.writeUInt32LE(i, 4 * i);
      count[0] = 150;
      return 0;
    },
    4,
    codes,
  );
  assert.ok(list);
  assert.equal(list.count, 150);
  assert.equal(list.buffer.readUInt32LE(4 * 149), 149);
  assert.deepEqual(calls, [64, 166]);
  assert.equal(
    readRecords(() => 3, 4, codes),
    undefined,
    'another status is a refusal',
  );
  assert.equal(
    readRecords((_b, count) => ((count[0] = 1e9), 7), 4, codes),
    undefined,
    'a library that is never satisfied gives up',
  );
  const capped = readRecords((_b, count) => ((count[0] = 1000), 0), 4, codes);
  assert.equal(capped?.count, 64, 'a count beyond the buffer is capped at its capacity');
});
