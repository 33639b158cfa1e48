/**
 * The transfer engine's conformance suite on the real HIP backend over a fake libamdhip64 (backend/hip/fake: built
 * with cc here; "device" memory is host memory and copies are memcpy at the call; no GPU involved). Where the host
 * backend copies on the JS thread, here the engine runs as on a GPU: the library loaded through koffi, the host
 * copier's worker threads pinning the ring's slots with hipHostMalloc and doing the chunks' host copies and file
 * reads, hipMemcpyBatchAsync (ROCm 7.1: without attributes) carrying chunks of many pieces. The cases that compile
 * kernels or replay captured graphs are left out (the fake has no compiler and runs no graph). Also what the library
 * is asked for a list's chunks (FAKE_HIP_LOG): one copy per chunk where its pieces continue each other, else one
 * hipMemcpyBatchAsync per chunk.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { FakeRocm, haveCompiler, RELEASES, useFakeEnvironment } from '../backend/hip/fake/fake-rocm.js';
import { openRuntime } from '../runtime/runtime.js';
import { fileConformance } from './file.case.js';
import { manyConformance } from './many.case.js';
import { pattern, transferConformance } from './transfer.case.js';

if (haveCompiler()) {
  const fake = new FakeRocm();
  const log = join(fake.root, 'hip.log');
  const restore = useFakeEnvironment({ GPUMEM_LIBAMDHIP64: fake.install('rocm-7.1.0', RELEASES['7.1']!).hip });
  after(() => {
    restore();
    fake.dispose();
  });
  const open = () => openRuntime({ backend: 'hip' });
  transferConformance('hip (fake ROCm 7.1 library)', open, { graphs: false });
  manyConformance('hip (fake ROCm 7.1 library)', open);
  fileConformance('hip (fake ROCm 7.1 library)', open);

  test('hip (fake ROCm 7.1 library): a list lands with one copy per chunk (in order or reversed), or one batched copy per chunk; the threads pin the ring', async () => {
    // The library logs each call while FAKE_HIP_LOG names a file (read at every call): for this case only.
    process.env.FAKE_HIP_LOG = log;
    using _log = { [Symbol.dispose]: () => delete process.env.FAKE_HIP_LOG };
    using rt = open();
    using copier = {
      c: rt.backend.createHostCopier(1),
      [Symbol.dispose]() {
        this.c.dispose();
      },
    };
    assert.equal(copier.c.canPin, true, 'the backend told its threads how its runtime pins memory');
    const KiB = 1024;
    using st = rt.createStager({ chunkBytes: 64 * KiB, depth: 3, threads: 2, directBelow: 0 });
    const n = 32;
    using dst = rt.device(0).alloc(2 * n * 4 * KiB);
    const srcs = Array.from({ length: n }, (_, i) => pattern(4 * KiB, i));
    const copies = (): string[] => FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMemcpy'));
    copies();
    await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * 4 * KiB })));
    assert.deepEqual(copies(), [`hipMemcpyAsync ${64 * KiB}`, `hipMemcpyAsync ${64 * KiB}`]);
    // In reverse: each chunk is laid out in its slot in device order, and lands with one copy too.
    await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: (n - 1 - i) * 4 * KiB })));
    assert.deepEqual(copies(), [`hipMemcpyAsync ${64 * KiB}`, `hipMemcpyAsync ${64 * KiB}`]);
    const back = new Uint8Array(n * 4 * KiB);
    await st.download(back, dst);
    srcs.forEach((s, i) => assert.deepEqual(back.subarray((n - 1 - i) * 4 * KiB, (n - i) * 4 * KiB), s));
    copies();
    // Every other place, in reverse: no piece continues another, one batched copy per chunk.
    await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: 2 * (n - 1 - i) * 4 * KiB })));
    assert.deepEqual(copies(), ['hipMemcpyBatchAsync count=16 numAttrs=0', 'hipMemcpyBatchAsync count=16 numAttrs=0']);
    const out = new Uint8Array(2 * n * 4 * KiB);
    await st.download(out, dst);
    srcs.forEach((s, i) => assert.deepEqual(out.subarray(2 * (n - 1 - i) * 4 * KiB, (2 * (n - 1 - i) + 1) * 4 * KiB), s));
  });
} else {
  const { test } = await import('node:test');
  test('transfer conformance on a fake ROCm library', { skip: 'no C compiler (cc) to build the fake ROCm libraries' }, () => {});
}
