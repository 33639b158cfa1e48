/**
 * On machines without a GPU (CI among them) the CUDA and HIP libraries still load for real and must answer
 * "no device" cleanly. GPUMEM_EXPECT_HIP=1 / GPUMEM_EXPECT_CUDA=1 turn a missing library into a failure, and so does
 * a GPU the system itself sees (system-devices.ts): present but broken fails, it does not skip.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackendUnavailableError, ErrorCode, GpuError } from '../errors.js';
import { openRuntime } from '../runtime/runtime.js';
import { main } from '../cli/program.js';
import type { Backend } from './backend.js';
import { createCudaBackend } from './cuda/cuda-backend.js';
import { createHipBackend } from './hip/hip-backend.js';
import { openBackend } from './select.js';
import { systemSeesGpu } from './system-devices.js';

for (const name of ['cuda', 'hip'] as const) {
  const create = name === 'cuda' ? createCudaBackend : createHipBackend;
  // A GPU the operating system sees must be opened: a backend that cannot is a failure, not a skip.
  const seen = systemSeesGpu(name);
  const expect = process.env[`GPUMEM_EXPECT_${name.toUpperCase()}`] === '1' || seen !== undefined;
  let backend: Backend | undefined;
  let loadError: unknown;
  try {
    backend = create();
  } catch (e) {
    loadError = e;
  }
  const devices = backend?.deviceCount() ?? 0;
  backend?.dispose();
  test(`${name}: a GPU the system sees is one the backend opens`, { skip: seen ? false : `the system shows no ${name} GPU` }, () => {
    assert.ok(devices > 0, `${seen}, but the ${name} backend sees none: ${(loadError as Error)?.message ?? backend?.noDeviceReason() ?? ''}`);
  });
  const skip = devices > 0 ? 'a device is present: the conformance suite covers it' : !backend && !expect ? `the ${name} library is not installed here` : false;
  test(`${name}: the library loads and answers "no device" cleanly; asked for by name, the backend refuses to open`, { skip }, async () => {
    assert.ok(!loadError, `the ${name} library did not load: ${(loadError as Error)?.message}`);
    const b = create();
    try {
      assert.equal(b.name, name);
      assert.equal(b.deviceCount(), 0);
      assert.match(b.noDeviceReason() ?? '', /NoDevice|InsufficientDriver|NotInitialized/);
      const driver = b.libraries.find((l) => l.role === 'driver');
      if (name === 'cuda' && driver && !driver.loaded) {
        // The toolkit without a driver: "insufficient driver" would read as a broken driver; say that none is installed.
        assert.match(b.noDeviceReason() ?? '', /^no NVIDIA driver is installed \(libcuda\.so\.1 was not found/);
      }
      const runtime = b.libraries.find((l) => l.role === 'runtime');
      assert.ok(runtime?.loaded && runtime.path, 'the runtime library has a resolved path');
      assert.ok(b.runtimeVersion, 'the runtime reports its version');
      // The management library (NVML, ROCm SMI) is listed, loaded or not; CI installs ROCm SMI beside HIP.
      const management = b.libraries.find((l) => l.role === 'management' && !l.name.startsWith('libamd_smi'));
      assert.ok(management, 'the management library is listed');
      if (name === 'hip' && process.env.GPUMEM_EXPECT_HIP === '1') assert.ok(management.loaded && management.path, `ROCm SMI loads: ${management.error ?? ''}`);
      if (name === 'hip') {
        // HIP declares hipHostMallocWriteCombined for CUDA source compatibility only: not a capability.
        assert.equal(b.capabilities.writeCombined, false);
        assert.ok(b.installRoot, 'the install the libraries came from is named');
      }
    } finally {
      b.dispose();
    }
    // Asked for by name, a backend without a device fails at open, saying why; detection falls back to the host.
    assert.throws(
      () => openRuntime({ backend: name }),
      (e: unknown) =>
        e instanceof BackendUnavailableError &&
        new RegExp(`^${name}: the backend was asked for but has no device \\(.*(NoDevice|InsufficientDriver|driver)`).test(e.message),
    );
    const out: string[] = [];
    const err: string[] = [];
    assert.equal(await main(['info', '--json', '--backend', name], { out: (s) => out.push(s), err: (s) => err.push(s) }), 1);
    assert.deepEqual(out, [], 'nothing half-done on stdout');
    assert.match(err.join(''), /has no device/);
    const sel = openBackend({ backend: 'auto' });
    try {
      assert.equal(sel.how, 'fallback');
      assert.match(sel.notice ?? '', new RegExp(`${name}: .*(NoDevice|InsufficientDriver|driver)`));
    } finally {
      sel.backend.dispose();
    }
  });
}

test("the system's own view of GPUs: KFD topology nodes with SIMDs, /proc/driver/nvidia/gpus", () => {
  const root = mkdtempSync(join(tmpdir(), 'gpumem-sys-'));
  try {
    const node = (i: number, simd: number): void => {
      const dir = join(root, 'sys/class/kfd/kfd/topology/nodes', String(i));
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'properties'), `cpu_cores_count 0\nsimd_count ${simd}\nmem_banks_count 1\n`);
    };
    const sys = join(root, 'sys');
    const proc = join(root, 'proc');
    assert.equal(systemSeesGpu('hip', { sys, proc, tools: false }), undefined, 'no KFD: no AMD GPU');
    node(0, 0);
    assert.equal(systemSeesGpu('hip', { sys, proc, tools: false }), undefined, 'a CPU node has no SIMDs');
    node(1, 304);
    node(2, 304);
    assert.match(systemSeesGpu('hip', { sys, proc, tools: false }) ?? '', /lists 2 GPU node/);
    assert.equal(systemSeesGpu('cuda', { sys, proc, tools: false }), undefined);
    mkdirSync(join(proc, 'driver/nvidia/gpus/0000:3b:00.0'), { recursive: true });
    assert.match(systemSeesGpu('cuda', { sys, proc, tools: false }) ?? '', /lists 1 GPU/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

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
