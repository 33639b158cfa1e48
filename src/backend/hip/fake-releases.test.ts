/**
 * The HIP backend against fake installs of ROCm 5.2, 5.3, 5.5, 6.1, 7.0 and 7.1 (fake/fake-rocm.ts: libraries built
 * with gcc here that answer as each release does where gpumem's decisions depend on it). No AMD GPU is involved:
 * these check which call, flag, attribute count and library gpumem chooses, as the fake runtime logs them.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ErrorCode, GpuError } from '../../errors.js';
import { openRuntime, type Runtime } from '../../runtime/runtime.js';
import { numaNodes } from '../sysfs.js';
import { FakeRocm, haveCompiler, RELEASES, useFakeEnvironment, type FakeRelease } from './fake/fake-rocm.js';

const skip = haveCompiler() ? false : 'no C compiler (cc) to build the fake ROCm libraries';
const fake = skip ? undefined : new FakeRocm();
after(() => fake?.dispose());
const log = fake ? join(fake.root, 'calls.log') : '';
const built = new Map<string, string>();

/** Opens the runtime on a fake release with the fake's environment set, and restores the environment after. */
function withRelease<T>(name: string, release: FakeRelease, env: Record<string, string>, fn: (rt: Runtime) => T): T {
  let hip = built.get(name);
  if (!hip) {
    hip = fake!.install(name, release).hip;
    built.set(name, hip);
  }
  const restore = useFakeEnvironment({ GPUMEM_LIBAMDHIP64: hip, FAKE_HIP_LOG: log, ...env });
  FakeRocm.takeLog(log);
  const rt = openRuntime({ backend: 'hip' });
  try {
    return fn(rt);
  } finally {
    rt[Symbol.dispose]();
    restore();
  }
}

test('ROCm 7.1: copyBatch calls hipMemcpyBatchAsync with zero attributes, 8192 copies a call, and says so', { skip }, () => {
  withRelease('rocm-7.1.0', RELEASES['7.1']!, {}, (rt) => {
    const n = 20_000;
    const dev = rt.device(0);
    const src = dev.alloc(16 * n);
    const dst = dev.alloc(16 * n);
    const bytes = rt.backend.hostView(src.address, 16 * n);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff;
    using stream = dev.createStream();
    const copies = Array.from({ length: n }, (_, i) => ({ dst, src, bytes: 16, dstOffset: 16 * (n - 1 - i), srcOffset: 16 * i }));
    const r = rt.copyBatch(copies, { stream });
    assert.equal(r.path, 'batch');
    assert.equal(r.attributes, 'none', 'ROCm 7.1 refuses any attribute: none is passed');
    assert.equal(r.nativeCalls, 3, '20000 copies in calls of at most 8192');
    const calls = FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMemcpyBatchAsync'));
    assert.deepEqual(calls, [
      'hipMemcpyBatchAsync count=8192 numAttrs=0',
      'hipMemcpyBatchAsync count=8192 numAttrs=0',
      'hipMemcpyBatchAsync count=3616 numAttrs=0',
    ]);
    const out = rt.backend.hostView(dst.address, 16 * n);
    for (const i of [0, 8191, 8192, n - 1]) assert.deepEqual(out.subarray(16 * (n - 1 - i), 16 * (n - i)), bytes.subarray(16 * i, 16 * i + 16), `copy ${i}`);
  });
});

test('a release that takes attributes gets them; one that refuses them steps down to none, then one by one', { skip }, () => {
  const copy = (rt: Runtime): ReturnType<Runtime['copyBatch']> => {
    const dev = rt.device(0);
    const a = dev.alloc(4096);
    const b = dev.alloc(4096);
    using stream = dev.createStream();
    return rt.copyBatch([{ dst: b, src: a, bytes: 64 }], { stream });
  };
  withRelease('rocm-7.13.0', { ...RELEASES['7.1']!, minor: 13, batch: { failIndex: true, attributes: true } }, {}, (rt) => {
    assert.equal(copy(rt).attributes, 'per-run');
    assert.deepEqual(
      FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMemcpyBatch')),
      ['hipMemcpyBatchAsync count=1 numAttrs=1'],
    );
  });
  withRelease('rocm-7.13.0-refusing', { ...RELEASES['7.1']!, minor: 13 }, {}, (rt) => {
    const r = copy(rt);
    assert.equal(r.attributes, 'none');
    assert.match(r.note ?? '', /refused copy attributes \(status 801\)/);
    assert.deepEqual(
      FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMemcpyBatch')),
      ['hipMemcpyBatchAsync count=1 numAttrs=1', 'hipMemcpyBatchAsync count=1 numAttrs=0'],
    );
  });
  withRelease('rocm-7.1.0-refusing', { ...RELEASES['7.1']!, batch: { failIndex: true, attributes: false, refuseAll: true } }, {}, (rt) => {
    const r = copy(rt);
    assert.equal(r.path, 'loop');
    assert.equal(r.nativeCalls, 1);
    assert.match(r.note ?? '', /refused the batch/);
    assert.deepEqual(
      FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMemcpy')),
      ['hipMemcpyBatchAsync count=1 numAttrs=0', 'hipMemcpyAsync 64'],
    );
  });
});

test('a header without failIdx binds the 8-argument form (the 9-argument call would pass a bad stream)', { skip }, () => {
  const release = { ...RELEASES['7.1']!, batch: { failIndex: false, attributes: false }, header: { failIndex: false } };
  withRelease('rocm-7.20.0-no-failidx', release, {}, (rt) => {
    const dev = rt.device(0);
    const a = dev.alloc(64);
    const b = dev.alloc(64);
    using stream = dev.createStream();
    assert.equal(rt.copyBatch([{ dst: b, src: a }], { stream }).path, 'batch');
  });
});

test('ROCm 5.2: hipMallocAsync never gets the null stream; 5.3 does', { skip }, () => {
  for (const [name, expect] of [
    ['5.2', 'created'],
    ['5.3', 'null'],
  ] as const) {
    withRelease(`rocm-${name}.0`, RELEASES[name]!, {}, (rt) => {
      const p = rt.backend.mallocAsync(0, 1024, 0);
      rt.backend.freeAsync(p, 0);
      assert.deepEqual(
        FakeRocm.takeLog(log).filter((l) => l.startsWith('hipMallocAsync')),
        [`hipMallocAsync stream=${expect}`],
        name,
      );
    });
  }
});

test('uncached device memory: refused before the call on 5.5, taken on 6.1', { skip }, () => {
  withRelease('rocm-5.5.0', RELEASES['5.5']!, {}, (rt) => {
    assert.equal(rt.backend.capabilities.uncachedDeviceMemory, false);
    assert.throws(
      () => rt.device(0).alloc(4096, { uncached: true }),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.UNSUPPORTED,
    );
    assert.deepEqual(
      FakeRocm.takeLog(log).filter((l) => l.includes('0x3')),
      [],
      'no native call with the flag',
    );
  });
  withRelease('rocm-6.1.0', RELEASES['6.1']!, {}, (rt) => {
    rt.device(0).alloc(4096, { uncached: true }).free();
    assert.deepEqual(FakeRocm.takeLog(log), ['hipExtMallocWithFlags flags=0x3']);
  });
});

test('pinned memory: coherence always named (coherent unless asked otherwise), numaNode through the thread policy, put back after', { skip }, () => {
  withRelease('rocm-6.1.0', RELEASES['6.1']!, {}, (rt) => {
    rt.allocPinned(4096).free();
    rt.allocPinned(4096, { coherent: false }).free();
    rt.allocMapped(4096).free();
    const flags = FakeRocm.takeLog(log).map((l) => /flags=(0x[0-9a-f]+)/.exec(l)?.[1]);
    assert.deepEqual(flags, ['0x40000000', '0x80000000', '0x40000002'], 'Coherent, NonCoherent, Mapped|Coherent; never Portable alone');
    const node = numaNodes()[0]!;
    rt.allocPinned(4096, { numaNode: node }).free();
    rt.allocPinned(4096).free();
    const [numa, plain] = FakeRocm.takeLog(log);
    // MPOL_PREFERRED (1) naming the node during the call, the thread's own policy (MPOL_DEFAULT here) after it.
    assert.equal(numa, `hipHostMalloc flags=0x60000000 policy=1 mask=0x${(1n << BigInt(node)).toString(16)}`);
    assert.equal(plain, 'hipHostMalloc flags=0x40000000 policy=0 mask=0x0');
  });
});

test('XNACK from the runtime or the target ID; VMM and memory pools from the device attributes', { skip }, () => {
  withRelease('rocm-6.1.0', RELEASES['6.1']!, { FAKE_HIP_ARCH: 'gfx90a:sramecc-:xnack+', FAKE_HIP_VMM: '0' }, (rt) => {
    assert.deepEqual(rt.device(0).info().xnack, { arch: true, enabled: true, source: 'arch' });
    assert.equal(rt.backend.capabilities.virtualMemory, false, 'the symbols are there, the device says no');
    assert.equal(rt.backend.capabilities.streamOrderedAllocator, true);
  });
  withRelease('rocm-6.1.0', RELEASES['6.1']!, { FAKE_HIP_ARCH: 'gfx90a:sramecc-:xnack+', FAKE_HIP_PAGEABLE: '0', FAKE_HIP_POOLS: '0' }, (rt) => {
    assert.deepEqual(rt.device(0).info().xnack, { arch: true, enabled: false, source: 'runtime' });
    assert.equal(rt.backend.capabilities.virtualMemory, true);
    assert.equal(rt.backend.capabilities.streamOrderedAllocator, false, 'hipDeviceAttributeMemoryPoolsSupported = 0');
  });
});

test('AMD SMI first from 6.1: each MI300 partition its own memory and NUMA node; ROCm SMI alone before 6.1', { skip }, () => {
  const cpx = { FAKE_HIP_DEVICES: '8', FAKE_HIP_SAME_BUS: '1', FAKE_SMI_PARTITIONS: '8', FAKE_SMI_NODES: '2', FAKE_SMI_VRAM_GIB: '192' };
  // 7.0's AMD SMI has the HIP id (enumeration info), and numbers the partitions in reverse of HIP here.
  withRelease('rocm-7.0.0', RELEASES['7.0']!, cpx, (rt) => {
    const use = rt.device(0).memoryUse();
    assert.equal(use.source, 'amd-smi');
    assert.equal(use.totalBytes, 24 * 2 ** 30, 'a CPX partition holds an eighth of 192 GiB');
    assert.equal(use.uuid, 'fake-uuid-7', 'HIP device 0 is AMD SMI processor 7');
    assert.equal(rt.device(0).info().numaNode, 1);
    assert.equal(rt.device(7).info().numaNode, 0);
  });
  // 6.1's has no HIP id: matched by PCI address and partition.
  withRelease('rocm-6.1.0', RELEASES['6.1']!, cpx, (rt) => {
    assert.equal(rt.device(3).memoryUse().uuid, 'fake-uuid-3');
    assert.equal(rt.device(3).info().numaNode, 1);
  });
  withRelease('rocm-5.5.0', RELEASES['5.5']!, { FAKE_SMI_VRAM_GIB: '64' }, (rt) => {
    const use = rt.device(0).memoryUse();
    assert.equal(use.source, 'rocm-smi');
    assert.equal(use.totalBytes, 64 * 2 ** 30);
    assert.equal(
      rt.backend.libraries.some((l) => l.name.startsWith('libamd_smi')),
      false,
      'AMD SMI is not looked for before 6.1',
    );
  });
});

test('an APU counts GTT with its VRAM carve-out', { skip }, () => {
  withRelease('rocm-6.1.0', RELEASES['6.1']!, { FAKE_HIP_INTEGRATED: '1', FAKE_SMI_VRAM_GIB: '1', FAKE_SMI_GTT_GIB: '64' }, (rt) => {
    const use = rt.device(0).memoryUse();
    assert.equal(use.gttTotalBytes, 64 * 2 ** 30);
    assert.equal(use.totalBytes, 65 * 2 ** 30, 'carve-out plus GTT');
  });
  withRelease('rocm-6.1.0', RELEASES['6.1']!, { FAKE_SMI_VRAM_GIB: '192', FAKE_SMI_GTT_GIB: '64' }, (rt) => {
    assert.equal(rt.device(0).memoryUse().totalBytes, 192 * 2 ** 30, 'a discrete GPU: VRAM alone, GTT apart');
  });
});

test('ROCm 5.3: a captured host function gets non-null user data (5.3 and 5.4 refuse null there)', { skip }, () => {
  withRelease('rocm-5.3.0', RELEASES['5.3']!, {}, (rt) => {
    const b = rt.backend;
    const s = b.createStream(0, {});
    b.beginCapture(s);
    const release = b.captureHostFunc(s, () => {});
    b.destroyGraph(b.endCapture(s));
    release();
    b.destroyStream(0, s);
    assert.deepEqual(
      FakeRocm.takeLog(log).filter((l) => l.startsWith('hipLaunchHostFunc')),
      ['hipLaunchHostFunc user=set capturing=1'],
    );
  });
});
