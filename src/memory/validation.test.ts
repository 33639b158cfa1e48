/**
 * Bad input is rejected in TypeScript before any native call: a spy counts the calls that reach the backend.
 * Also: a sticky fault (a kernel touching memory it does not own) marks the backend unusable and says so.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, GpuError } from '../errors.js';
import { BENCH_KERNELS } from '../kernels/bench-kernels.js';
import { openRuntime } from '../runtime/runtime.js';
import { spiedRuntime } from '../testing/spied-runtime.js';

const spied = (): ReturnType<typeof spiedRuntime> => spiedRuntime(2);

const code = (c: string) => (e: unknown) => e instanceof GpuError && e.code === c;

test('rejected calls never reach the backend', () => {
  const { rt, calls } = spied();
  const d0 = rt.device(0);
  const d1 = rt.device(1);
  const a = d0.alloc(1024);
  const b = d1.alloc(1024);
  const s1 = d1.createStream();
  const freed = d0.alloc(64);
  freed.free();
  const before = calls.length;
  const rejected: Array<[() => unknown, string]> = [
    [() => d0.alloc(-5), ErrorCode.INVALID_SIZE],
    [() => d0.alloc(0.25), ErrorCode.INVALID_SIZE],
    [() => d0.alloc(Number.NaN), ErrorCode.INVALID_SIZE],
    [() => d0.alloc(2 ** 53 + 2), ErrorCode.INVALID_SIZE],
    [() => rt.allocPinned(0), ErrorCode.INVALID_SIZE],
    [() => rt.allocPageable(-1), ErrorCode.INVALID_SIZE],
    [() => rt.copy(a, b, { bytes: 2048 }), ErrorCode.OUT_OF_BOUNDS],
    [() => rt.copy(a, b, { srcOffset: 1025 }), ErrorCode.OUT_OF_BOUNDS],
    [() => rt.copy(a, freed), ErrorCode.DISPOSED],
    [() => freed.free(), ErrorCode.DOUBLE_FREE],
    [() => rt.copy(a, 0xdead0000), ErrorCode.FOREIGN_ADDRESS],
    [() => rt.copy(a, a, { stream: s1, bytes: 8 }), ErrorCode.WRONG_DEVICE],
    [() => rt.fill(a, -1), ErrorCode.INVALID_ARGUMENT],
    [() => rt.device(7), ErrorCode.INVALID_ARGUMENT],
    [() => d0.alloc(1024, { fineGrained: true }), ErrorCode.UNSUPPORTED],
    [() => rt.allocPinned(1024, { coherent: true }), ErrorCode.UNSUPPORTED],
    [() => d0.createStream({ priority: 0.5 }), ErrorCode.INVALID_ARGUMENT],
  ];
  for (const [fn, c] of rejected) assert.throws(fn, code(c), String(fn));
  assert.deepEqual(calls.slice(before), [], 'no backend call was made for a rejected request');
  s1[Symbol.dispose]();
  rt[Symbol.dispose]();
});

test("a copy touching another runtime's memory is refused", () => {
  using rt1 = openRuntime({ backend: 'host' });
  using rt2 = openRuntime({ backend: 'host' });
  using a = rt1.device(0).alloc(64);
  using b = rt2.device(0).alloc(64);
  assert.throws(() => rt1.copy(a, b), code(ErrorCode.FOREIGN_ADDRESS));
  using s2 = rt2.device(0).createStream();
  assert.throws(() => rt1.copy(a, a, { stream: s2, bytes: 8 }), code(ErrorCode.FOREIGN_ADDRESS));
});

test('a sticky fault marks the backend unusable and every later call says so', async () => {
  const rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 26 } });
  const d = rt.device(0);
  const m = d.loadModule(BENCH_KERNELS);
  using small = d.alloc(64);
  using s = d.createStream();
  // Ask the kernel to fill 1 MiB of a 64-byte buffer: it runs off the end, as an illegal address on a GPU.
  m.kernel('fill_pattern').launch({ grid: 1, block: 32, stream: s }, small, 1 << 18, 1);
  await assert.rejects(s.synchronize(), code(ErrorCode.DEVICE_UNUSABLE));
  assert.match(rt.backend.unusableReason ?? '', /illegal address/);
  assert.throws(() => d.alloc(64), code(ErrorCode.DEVICE_UNUSABLE));
  assert.throws(() => rt.copy(small, small, { bytes: 8 }), code(ErrorCode.DEVICE_UNUSABLE));
});

test('the runtime frees what is still live when disposed, and refuses use afterwards', () => {
  const rt = openRuntime({ backend: 'host' });
  const a = rt.device(0).alloc(4096);
  const p = rt.allocPinned(4096);
  assert.equal(rt.liveMemory().device.count, 1);
  rt[Symbol.dispose]();
  rt[Symbol.dispose]();
  assert.equal(a.disposed, true);
  assert.equal(p.disposed, true);
  assert.throws(() => rt.device(0), code(ErrorCode.DISPOSED));
});
