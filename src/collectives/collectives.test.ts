/**
 * Collectives: the host implementation against a plain reference over generated calls, the checks every call
 * passes before any native call, NCCL's absence answered cleanly, the binding against nccl.h where one is installed,
 * and `gpumem bench --only collectives` on the host backend's logical devices.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { ErrorCode, isGpuError } from '../errors.js';
import { openRuntime } from '../runtime/runtime.js';
import { runCli } from '../testing/harness.js';
import type { BenchReport } from '../formats/bench-schema.js';
import { loadNccl, NcclCommunicator, NCCL_PROTOTYPES } from './nccl.js';
import { StagedCommunicator } from './staged.js';
import { bufferBytes, COLLECTIVES, ncclTestsSize, type Collective, type DType, type Reduction } from './types.js';

const CTORS = { int8: Int8Array, uint8: Uint8Array, int32: Int32Array, uint32: Uint32Array, float32: Float32Array, float64: Float64Array } as const;
type Arr = Int8Array | Uint8Array | Int32Array | Uint32Array | Float32Array | Float64Array;

/** The result each rank must hold, computed the plain way. */
function reference(op: Collective, inputs: Arr[], count: number, dtype: DType, reduction: Reduction, root: number): Arr[] {
  const n = inputs.length;
  const make = (len: number): Arr => new CTORS[dtype](len) as Arr;
  const red = (vals: number[]): number => {
    const a = make(1);
    a[0] = vals[0]!;
    for (const v of vals.slice(1))
      a[0] = reduction === 'sum' ? a[0]! + v : reduction === 'prod' ? a[0]! * v : reduction === 'max' ? Math.max(a[0]!, v) : Math.min(a[0]!, v);
    return a[0]!;
  };
  return inputs.map((_, r) => {
    switch (op) {
      case 'all-reduce':
        return (CTORS[dtype] as { from(x: number[]): Arr }).from(Array.from({ length: count }, (_, i) => red(inputs.map((x) => x[i]!))));
      case 'reduce-scatter':
        return (CTORS[dtype] as { from(x: number[]): Arr }).from(Array.from({ length: count }, (_, i) => red(inputs.map((x) => x[r * count + i]!))));
      case 'all-gather': {
        const out = make(count * n);
        for (let s = 0; s < n; s++) out.set(inputs[s]!.subarray(0, count), s * count);
        return out;
      }
      case 'broadcast':
        return inputs[root]!.slice(0, count);
      case 'all-to-all': {
        const out = make(count * n);
        for (let i = 0; i < n; i++) out.set(inputs[i]!.subarray(r * count, (r + 1) * count), i * count);
        return out;
      }
      case 'send-recv':
        return inputs[(r + n - 1) % n]!.slice(0, count);
    }
  });
}

test('the host implementation of every collective equals the plain reference', async () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 3, deviceBytes: 1 << 24 } });
  using comm = new StagedCommunicator(rt, [0, 1, 2]);
  await fc.assert(
    fc.property(
      fc.constantFrom(...COLLECTIVES),
      fc.constantFrom<DType>('int32', 'uint8', 'float32', 'float64'),
      fc.constantFrom<Reduction>('sum', 'max', 'min', 'prod'),
      fc.integer({ min: 0, max: 300 }),
      fc.integer({ min: 0, max: 2 }),
      fc.integer(),
      (op, dtype, reduction, count, root, seed) => {
        const n = 3;
        const need = bufferBytes(op, count, dtype, n);
        const esize = CTORS[dtype].BYTES_PER_ELEMENT;
        const inputs = [0, 1, 2].map((r) => {
          const a = new CTORS[dtype](need.send / esize) as Arr;
          for (let i = 0; i < a.length; i++) a[i] = ((Math.imul(seed ^ (r * 7919), i + 1) >>> 3) % 9) - (dtype === 'uint8' ? 0 : 4);
          return a;
        });
        const send = inputs.map((a, r) => {
          const d = rt.device(r).alloc(Math.max(1, need.send));
          if (need.send > 0) {
            using h = rt.allocPageable(a.buffer.slice(0) as ArrayBuffer);
            rt.copy(d, h, { bytes: need.send });
          }
          return d;
        });
        const recv = [0, 1, 2].map((r) => rt.device(r).alloc(Math.max(1, need.recv)));
        try {
          comm.run({ op, send, recv, count, dtype, reduction, root });
          const want = reference(op, inputs, count, dtype, reduction, root);
          for (let r = 0; r < n; r++) {
            using back = rt.allocPageable(Math.max(1, need.recv));
            if (need.recv > 0) rt.copy(back, recv[r]!, { bytes: need.recv });
            const got = back.typed(CTORS[dtype] as never, 0, need.recv / esize) as Arr;
            assert.deepEqual(Array.from(got), Array.from(want[r]!), `${op} ${dtype} ${reduction} rank ${r}`);
          }
        } finally {
          for (const a of [...send, ...recv]) a.free();
        }
      },
    ),
    propertyParams(120),
  );
});

test('a collective is checked before it runs: buffers per rank, their devices and sizes, the count, the root', () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 24 } });
  using comm = new StagedCommunicator(rt, [0, 1]);
  using a = rt.device(0).alloc(64);
  using b = rt.device(1).alloc(64);
  using small = rt.device(1).alloc(8);
  const code = (c: string) => (e: unknown) => isGpuError(e) && e.code === c;
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a], recv: [a, b], count: 4, dtype: 'float32' }), code(ErrorCode.INVALID_ARGUMENT));
  assert.throws(() => comm.run({ op: 'all-reduce', send: [b, a], recv: [a, b], count: 4, dtype: 'float32' }), code(ErrorCode.WRONG_DEVICE));
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a, small], recv: [a, b], count: 4, dtype: 'float32' }), code(ErrorCode.OUT_OF_BOUNDS));
  assert.throws(
    () => comm.run({ op: 'all-gather', send: [a, b], recv: [a, b], count: 16, dtype: 'float32' }),
    code(ErrorCode.OUT_OF_BOUNDS),
    'all-gather needs n x count',
  );
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a, b], recv: [a, b], count: -1, dtype: 'float32' }), code(ErrorCode.INVALID_SIZE));
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a, b], recv: [a, b], count: 1.5, dtype: 'float32' }), code(ErrorCode.INVALID_SIZE));
  assert.throws(() => comm.run({ op: 'broadcast', send: [a, b], recv: [a, b], count: 4, dtype: 'float32', root: 2 }), /root 2 is not a rank/);
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a, b], recv: [a, b], count: 4, dtype: 'float16' as DType }), /unknown element type/);
  const freed = rt.device(0).alloc(64);
  freed.free();
  assert.throws(() => comm.run({ op: 'all-reduce', send: [freed, b], recv: [a, b], count: 4, dtype: 'float32' }), code(ErrorCode.DISPOSED));
  comm[Symbol.dispose]();
  assert.throws(() => comm.run({ op: 'all-reduce', send: [a, b], recv: [a, b], count: 4, dtype: 'float32' }), code(ErrorCode.DISPOSED));
});

test("bus bandwidth factors are nccl-tests'", () => {
  assert.deepEqual(ncclTestsSize('all-reduce', 256, 'float32', 8), { bytes: 1024, busFactor: 14 / 8 });
  assert.deepEqual(ncclTestsSize('all-gather', 256, 'float32', 8), { bytes: 8192, busFactor: 7 / 8 });
  assert.deepEqual(ncclTestsSize('reduce-scatter', 256, 'float32', 8), { bytes: 8192, busFactor: 7 / 8 });
  assert.deepEqual(ncclTestsSize('broadcast', 256, 'float32', 8), { bytes: 1024, busFactor: 1 });
});

test('without NCCL the binding says which files it tried and the variable that sets the path', () => {
  const prior = process.env.GPUMEM_LIBNCCL;
  process.env.GPUMEM_LIBNCCL = '/nonexistent/libnccl.so.2';
  try {
    assert.throws(
      () => loadNccl('cuda'),
      (e: unknown) => isGpuError(e, ErrorCode.BACKEND_UNAVAILABLE) && /GPUMEM_LIBNCCL/.test((e as Error).message),
    );
  } finally {
    if (prior === undefined) delete process.env.GPUMEM_LIBNCCL;
    else process.env.GPUMEM_LIBNCCL = prior;
  }
  using rt = openRuntime({ backend: 'host', host: { devices: 2 } });
  assert.throws(
    () => new NcclCommunicator(rt, [0, 1], { library: 'nccl', fn: {}, path: undefined, version: '0.0.0' }),
    (e: unknown) => isGpuError(e, ErrorCode.UNSUPPORTED),
  );
});

/** nccl.h where one is installed: the CUDA toolkit's, the system's, pip's nvidia-nccl wheel, or GPUMEM_NCCL_INCLUDE. */
function ncclHeader(): string | undefined {
  const dirs = [process.env.GPUMEM_NCCL_INCLUDE, '/usr/include', '/usr/local/cuda/include', '/usr/local/include'].filter((x): x is string => !!x);
  return dirs.map((d) => join(d, 'nccl.h')).find((f) => existsSync(f));
}

const header = ncclHeader();
test('the NCCL binding matches nccl.h: every function bound is declared there with as many parameters', {
  skip: header ? false : 'no nccl.h here (set GPUMEM_NCCL_INCLUDE, or install libnccl-dev or pip nvidia-nccl-cu13)',
}, () => {
  const text = readFileSync(header!, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '');
  for (const proto of NCCL_PROTOTYPES) {
    const name = /(\w+)\s*\(/.exec(proto)![1]!;
    const params = proto.slice(proto.indexOf('(') + 1, proto.lastIndexOf(')')).trim();
    const count = params === '' ? 0 : params.split(',').length;
    const decl = new RegExp(`ncclResult_t\\s+${name}\\s*\\(([^)]*)\\)`).exec(text) ?? new RegExp(`\\b${name}\\s*\\(([^)]*)\\)`).exec(text);
    assert.ok(decl, `${name} is declared in ${header}`);
    const theirs = decl[1]!.trim();
    assert.equal(theirs === '' || theirs === 'void' ? 0 : theirs.split(',').length, count, `${name}: parameters`);
  }
});

test('gpumem bench --only collectives across two host devices: every collective, verified, with bus bandwidth', async () => {
  process.env.GPUMEM_HOST_DEVICES = '2';
  let r: Awaited<ReturnType<typeof runCli>>;
  try {
    r = await runCli(['bench', '--backend', 'host', '--only', 'collectives', '--quick', '--max-size', '1MiB', '--json']);
  } finally {
    delete process.env.GPUMEM_HOST_DEVICES;
  }
  assert.equal(r.code, 0, r.err);
  const report = JSON.parse(r.out) as BenchReport;
  const rows = report.results.filter((x) => x.test === 'collective');
  assert.deepEqual([...new Set(rows.map((x) => x.direction))].sort(), [...COLLECTIVES].sort());
  for (const row of rows) {
    assert.equal(row.verified, true);
    assert.equal(row.ranks, 2);
    assert.equal(row.counted, 'algorithm');
    const { busFactor } = ncclTestsSize(row.direction as Collective, 1, 'float32', 2);
    assert.ok(Math.abs(row.medianBusGBps! - row.medianGBps! * busFactor) <= 0.002 + row.medianGBps! * 1e-6, `${row.direction}: bus = algorithm x ${busFactor}`);
  }
  assert.deepEqual(report.environment.failures, []);
  const one = await runCli(['bench', '--backend', 'host', '--only', 'collectives', '--quick']);
  assert.equal(one.code, 2);
  assert.match(one.err, /collectives need two devices/);
});

test('RCCL is looked for in the ROCm install HIP came from before any other', async () => {
  const { mkdirSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { libraryCandidates } = await import('../backend/library-search.js');
  const { ncclSpec } = await import('../backend/native/nccl-ffi.js');
  const root = mkdtempSync(join(tmpdir(), 'gpumem-rccl-'));
  try {
    for (const install of ['rocm-6.2.0', 'rocm-7.0.0']) {
      mkdirSync(join(root, install, 'lib'), { recursive: true });
      writeFileSync(join(root, install, 'lib', 'librccl.so.1'), '');
    }
    const hipInstall = join(root, 'rocm-6.2.0');
    const first = libraryCandidates(ncclSpec('hip', hipInstall))[0]!;
    assert.equal(first.path, join(hipInstall, 'lib', 'librccl.so.1'), 'the install HIP came from, not the newer one');
    assert.equal(ncclSpec('cuda', hipInstall).envVar, 'GPUMEM_LIBNCCL', 'NCCL ignores a ROCm install');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
