/**
 * safetensors files to device memory and back on the host backend, with real files: byte-exact loads of files built
 * here from the format's rules, round trips through the writer, filters, sharded checkpoints, destinations and
 * pools, and every failure (bad headers, missing shards, a FIFO, a file truncated or failing during the read, a
 * destination too small, an abort) leaving no allocation, no pinned slot and no file descriptor behind.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode, isGpuError } from '../errors.js';
import {
  dtypeBits,
  parseSafetensors,
  SAFETENSORS_DTYPES,
  SafetensorsError,
  serializeSafetensors,
  type SafetensorsHostTensor,
  type SafetensorsProblem,
} from '../formats/safetensors.js';
import type { Allocation } from '../memory/allocation.js';
import { openRuntime, type Runtime } from '../memory/runtime.js';
import { CachingPool, DeviceResource } from '../pool/index.js';
import { propertyParams } from '../testing/property.js';
import { loadSafetensors, saveSafetensors, type LoadedSafetensors } from './safetensors.js';
import { PinnedFileMover, verifyLoaded, type FileMover } from './safetensors-io.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-safetensors-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let seq = 0;
const fresh = (name = 'model.safetensors'): string => {
  const d = join(dir, `t${seq++}`);
  spawnSync('mkdir', ['-p', d]);
  return join(d, name);
};

const openFds = (): number => readdirSync('/proc/self/fd').length;
const host = (): Runtime => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 28 } });

async function deviceBytes(rt: Runtime, a: Allocation, offset: number, bytes: number): Promise<Buffer> {
  if (bytes === 0) return Buffer.alloc(0);
  const out = new Uint8Array(bytes);
  await rt.download(out, a, { srcOffset: offset, bytes });
  return Buffer.from(out);
}

/** A file as the format's README describes it, written here byte by byte. */
function specFile(path: string, header: string, data: number[] | Uint8Array): Buffer {
  const h = Buffer.from(header, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(h.byteLength));
  const bytes = Buffer.concat([prefix, h, Buffer.from(data)]);
  writeFileSync(path, bytes);
  return bytes;
}

/** Asserts that `p` rejects with a SafetensorsError of `problem` and that nothing was left allocated or open. */
async function refused(rt: Runtime, p: () => Promise<unknown>, problem: SafetensorsProblem, pinned = 0): Promise<SafetensorsError> {
  const fds = openFds();
  let caught: unknown;
  await p().catch((e: unknown) => (caught = e));
  assert.ok(caught instanceof SafetensorsError, `expected a SafetensorsError, got ${String(caught)}`);
  assert.equal(caught.problem, problem, caught.message);
  assert.equal(caught.code, ErrorCode.BAD_INPUT);
  assert.equal(rt.liveMemory().device.count, 0, 'no device memory left allocated');
  assert.equal(rt.liveMemory().pinned.count, pinned, 'no pinned slot left allocated but those of a mover given');
  assert.equal(openFds(), fds, 'no file descriptor left open');
  return caught;
}

test('a file built by hand from the README loads in one read, each tensor byte-exact where the file had it', async () => {
  using rt = host();
  const path = fresh();
  const f32 = new Uint8Array(new Float32Array([1, 2, 3, 4, 5, 6]).buffer);
  const bf16 = [0x80, 0x3f, 0x00, 0x40];
  const u8 = [1, 2, 3];
  // Leading spaces pad the header so that the byte buffer starts 8-aligned, as a writer may do.
  const json =
    '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},"m":{"dtype":"U8","shape":[3],"data_offsets":[28,31]},"__metadata__":{"format":"pt"}}';
  const header = ' '.repeat((8 - (json.length % 8)) % 8) + json;
  const file = specFile(path, header, [...f32, ...bf16, ...u8]);
  const fds = openFds();
  using loaded = await loadSafetensors(path, rt.device(0));
  assert.equal(openFds(), fds, 'the file is closed');
  assert.equal(loaded.reads, 1, 'every tensor loaded: one range');
  assert.equal(loaded.bytes, 31);
  assert.deepEqual(loaded.paths, ['buffered']);
  assert.deepEqual([...(loaded.metadata ?? [])], [['format', 'pt']]);
  const dataOffset = 8 + header.length;
  for (const [name, dtype, shape] of [
    ['w', 'F32', [2, 3]],
    ['b', 'BF16', [2]],
    ['m', 'U8', [3]],
  ] as const) {
    const t = loaded.tensors.get(name)!;
    assert.equal(t.dtype, dtype);
    assert.deepEqual(t.shape, shape);
    assert.equal(t.fileOffset - dataOffset, t.byteOffset, 'a whole file is placed as it lies in the file');
    assert.deepEqual(await deviceBytes(rt, t.allocation, t.byteOffset, t.bytes), file.subarray(t.fileOffset, t.fileOffset + t.bytes), name);
  }
  assert.equal(loaded.allocation.kind, 'device');
});

const tensorArb = fc
  .record({
    name: fc.string({ minLength: 1, maxLength: 10 }),
    dtype: fc.constantFrom(...SAFETENSORS_DTYPES),
    shape: fc.array(fc.integer({ min: 0, max: 24 }), { maxLength: 3 }),
    seed: fc.nat(255),
    keep: fc.boolean(),
  })
  .filter((t) => t.name !== '__metadata__')
  .map((t) => {
    const bits = dtypeBits(t.dtype);
    const shape = bits % 8 === 0 ? t.shape : [...t.shape, 4];
    const count = shape.reduce((a, b) => a * b, 1);
    return { ...t, shape, data: Uint8Array.from({ length: (count * bits) / 8 }, (_, i) => (i * 7 + t.seed) & 0xff) };
  });

test('round trip: random checkpoints and filters load byte-exact in as many reads as runs, and save back as the writer lays them out', async () => {
  using rt = host();
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(tensorArb, { maxLength: 10, selector: (t) => t.name }),
      fc.constantFrom('all', 'names', 'predicate'),
      async (tensors: Array<SafetensorsHostTensor & { keep: boolean }>, how) => {
        const path = fresh();
        const meta = { made: 'here', n: String(tensors.length) };
        const bytes = serializeSafetensors(tensors, meta);
        writeFileSync(path, bytes);
        const keep = (name: string): boolean => how === 'all' || tensors.find((t) => t.name === name)!.keep;
        const filter = how === 'names' ? tensors.filter((t) => t.keep).map((t) => t.name) : how === 'predicate' ? (n: string) => keep(n) : undefined;
        using loaded = await loadSafetensors(path, rt.device(1), filter ? { filter } : {});
        const dataOffset = bytes.byteLength - tensors.reduce((s, t) => s + t.data.byteLength, 0);
        const inFileOrder = [...loaded.tensors.values()].sort((a, b) => a.fileOffset - b.fileOffset);
        assert.deepEqual(new Set(loaded.tensors.keys()), new Set(tensors.filter((t) => keep(t.name)).map((t) => t.name)));
        for (const t of inFileOrder) {
          assert.equal(t.allocation.device, 1);
          assert.equal(t.byteOffset % 256, (t.fileOffset - dataOffset) % 256, 'alignment carries over from the file');
          assert.deepEqual(
            await deviceBytes(rt, t.allocation, t.byteOffset, t.bytes),
            Buffer.from(bytes.subarray(t.fileOffset, t.fileOffset + t.bytes)),
            t.name,
          );
        }
        // Reads: one per run of consecutive loaded tensors (in file order) holding any bytes.
        let runs = 0;
        let runBytes = 0;
        for (const t of parseSafetensors(bytes).header.tensors) {
          if (keep(t.name)) runBytes += t.bytes;
          else {
            if (runBytes > 0) runs++;
            runBytes = 0;
          }
        }
        if (runBytes > 0) runs++;
        assert.equal(loaded.reads, runs);
        // Saving what was loaded gives what the writer makes of the same tensors.
        const out = fresh('out.safetensors');
        await saveSafetensors(out, loaded);
        const kept = tensors.filter((t) => keep(t.name));
        assert.deepEqual(readFileSync(out), Buffer.from(serializeSafetensors(kept, meta)));
        if (how === 'all') assert.deepEqual(readFileSync(out), Buffer.from(bytes), 'a whole checkpoint saves back byte for byte');
      },
    ),
    propertyParams(25),
  );
  assert.equal(rt.liveMemory().device.count, 0);
  assert.equal(rt.liveMemory().pinned.count, 0);
});

/** A sharded checkpoint: two shards and their index, in a folder of its own. */
function sharded(): { folder: string; tensors: Map<string, Uint8Array> } {
  const folder = join(dir, `t${seq++}`);
  spawnSync('mkdir', ['-p', folder]);
  const tensors = new Map<string, Uint8Array>();
  const shard = (names: string[], n: number): SafetensorsHostTensor[] =>
    names.map((name, i) => {
      const data = Uint8Array.from({ length: 64 * (i + 1) }, (_, k) => (k + n * 13 + i) & 0xff);
      tensors.set(name, data);
      return { name, dtype: 'F32', shape: [16 * (i + 1)], data };
    });
  writeFileSync(join(folder, 'model-00001-of-00002.safetensors'), serializeSafetensors(shard(['a.weight', 'a.bias'], 1), { format: 'pt' }));
  writeFileSync(join(folder, 'model-00002-of-00002.safetensors'), serializeSafetensors(shard(['b.weight', 'b.bias', 'extra'], 2), { format: 'pt' }));
  const weightMap = {
    'a.weight': 'model-00001-of-00002.safetensors',
    'a.bias': 'model-00001-of-00002.safetensors',
    'b.weight': 'model-00002-of-00002.safetensors',
    'b.bias': 'model-00002-of-00002.safetensors',
  };
  writeFileSync(join(folder, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 448 }, weight_map: weightMap }));
  return { folder, tensors };
}

test('a sharded checkpoint loads through its index into one allocation; the index decides which tensors', async () => {
  using rt = host();
  const { folder, tensors } = sharded();
  for (const path of [folder, join(folder, 'model.safetensors.index.json')]) {
    using loaded = await loadSafetensors(path, rt.device(0));
    assert.deepEqual([...loaded.tensors.keys()].sort(), ['a.bias', 'a.weight', 'b.bias', 'b.weight'], 'a tensor the index does not list is not loaded');
    assert.equal(loaded.files.length, 2);
    for (const [name, t] of loaded.tensors) {
      assert.equal(t.allocation, loaded.allocation);
      assert.deepEqual(await deviceBytes(rt, t.allocation, t.byteOffset, t.bytes), Buffer.from(tensors.get(name)!), name);
    }
    const spans = [...loaded.tensors.values()].map((t) => [t.byteOffset, t.byteOffset + t.bytes]).sort((x, y) => x[0]! - y[0]!);
    for (let i = 1; i < spans.length; i++) assert.ok(spans[i]![0]! >= spans[i - 1]![1]!, 'no two tensors share bytes');
  }
  using some = await loadSafetensors(folder, rt.device(0), { filter: (n) => n.endsWith('.bias') });
  assert.deepEqual([...some.tensors.keys()].sort(), ['a.bias', 'b.bias']);
  assert.equal(some.reads, 2);
});

test('a missing shard, a shard without a tensor its index names, a bad index: refused before any allocation', async () => {
  using rt = host();
  const a = sharded();
  rmSync(join(a.folder, 'model-00002-of-00002.safetensors'));
  const e = await refused(rt, () => loadSafetensors(a.folder, rt.device(0)), 'missing-shard');
  assert.match(e.message, /model-00002-of-00002\.safetensors.*no such file/);
  const b = sharded();
  const index = JSON.parse(readFileSync(join(b.folder, 'model.safetensors.index.json'), 'utf8'));
  index.weight_map['c.weight'] = 'model-00001-of-00002.safetensors';
  writeFileSync(join(b.folder, 'model.safetensors.index.json'), JSON.stringify(index));
  await refused(rt, () => loadSafetensors(b.folder, rt.device(0)), 'missing-tensor');
  const huge = join(b.folder, 'huge.index.json');
  writeFileSync(huge, '{}');
  truncateSync(huge, 100_000_001);
  await refused(rt, () => loadSafetensors(huge, rt.device(0)), 'bad-index');
  index.weight_map['c.weight'] = '../model-00001-of-00002.safetensors';
  writeFileSync(join(b.folder, 'model.safetensors.index.json'), JSON.stringify(index));
  await refused(rt, () => loadSafetensors(b.folder, rt.device(0)), 'bad-index');
  await refused(rt, () => loadSafetensors(join(dir, 'nothing-here.safetensors'), rt.device(0)), 'not-a-file');
  const empty = join(dir, `t${seq++}`);
  spawnSync('mkdir', ['-p', empty]);
  await refused(rt, () => loadSafetensors(empty, rt.device(0)), 'not-a-file');
});

test('lying headers are refused with their problem, nothing allocated, no descriptor left open', async () => {
  using rt = host();
  const cases: Array<[string, (p: string) => void, SafetensorsProblem]> = [
    [
      'a header of gigabytes',
      (p) => {
        const b = Buffer.alloc(64);
        b.writeBigUInt64LE(3n * 2n ** 30n);
        writeFileSync(p, b);
      },
      'header-too-large',
    ],
    [
      'a header length past the end of the file',
      (p) => {
        const b = Buffer.alloc(64, 0x20);
        b.writeBigUInt64LE(1000n);
        writeFileSync(p, b);
      },
      'header-length',
    ],
    [
      'overlapping tensors',
      (p) => specFile(p, '{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', [1, 2, 3, 4]),
      'invalid-offset',
    ],
    ['an unknown dtype', (p) => specFile(p, '{"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}}', [1, 2, 3, 4]), 'unknown-dtype'],
    ['a shape that does not match the size', (p) => specFile(p, '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', [1, 2, 3, 4]), 'size-mismatch'],
    ['offsets past the end', (p) => specFile(p, '{"a":{"dtype":"U8","shape":[400],"data_offsets":[0,400]}}', [1, 2, 3, 4]), 'incomplete-buffer'],
    [
      'a file shorter than its header says',
      (p) => writeFileSync(p, serializeSafetensors([{ name: 'a', dtype: 'U8', shape: [64], data: new Uint8Array(64) }]).subarray(0, 90)),
      'incomplete-buffer',
    ],
    ['an empty file', (p) => writeFileSync(p, ''), 'header-too-small'],
  ];
  for (const [what, make, problem] of cases) {
    const p = fresh();
    make(p);
    await refused(rt, () => loadSafetensors(p, rt.device(0)), problem).catch((e: unknown) => assert.fail(`${what}: ${String(e)}`));
  }
});

test('a FIFO is refused at once, not waited on', async () => {
  using rt = host();
  const p = fresh('pipe.safetensors');
  assert.equal(spawnSync('mkfifo', [p]).status, 0, 'mkfifo');
  // Nobody writes to the FIFO: a load that opened it for a blocking read would never settle.
  await refused(rt, () => loadSafetensors(p, rt.device(0)), 'not-a-file');
});

/** A mover that hands the real one a file handle whose reads misbehave after the first `after` calls. */
function faulty(rt: Runtime, after: number, fault: (fh: FileHandle) => Promise<void>): FileMover & { inner: PinnedFileMover } {
  const inner = new PinnedFileMover(rt, { pieceBytes: 4096, slots: 2 });
  let calls = 0;
  const wrap = (fh: FileHandle): FileHandle =>
    new Proxy(fh, {
      get(target, prop) {
        if (prop === 'read') {
          return async (...args: Parameters<FileHandle['read']>) => {
            if (++calls > after) await fault(target);
            return (target.read as (...a: unknown[]) => unknown)(...args);
          };
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  return {
    inner,
    toDevice: (dst, fh, r) => inner.toDevice(dst, wrap(fh), r),
    toFile: inner.toFile,
    [Symbol.dispose]: () => inner[Symbol.dispose](),
  };
}

test('a file truncated during the read, or a read failing midway: typed error, nothing past the destination written, all freed', async () => {
  using rt = host();
  const tensors = Array.from({ length: 8 }, (_, i) => ({ name: `t${i}`, dtype: 'U8' as const, shape: [8192], data: new Uint8Array(8192).fill(i + 1) }));
  const file = serializeSafetensors(tensors);
  const p = fresh();
  writeFileSync(p, file);
  {
    using mover = faulty(rt, 3, async () => truncateSync(p, 20000));
    const e = await refused(rt, () => loadSafetensors(p, rt.device(0), { mover }), 'truncated', 1);
    assert.equal(e.file, p);
  }
  assert.equal(rt.liveMemory().pinned.count, 0, "the mover's slots are freed with it");
  writeFileSync(p, file);
  {
    using mover = faulty(rt, 5, async () => {
      throw Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });
    });
    const e = await refused(rt, () => loadSafetensors(p, rt.device(0), { mover }), 'read-failed', 1);
    assert.match(e.message, /EIO/);
  }
  // A file removed while it is read: the open descriptor still reads it whole (POSIX), so the load completes.
  {
    using mover = faulty(rt, 2, async () => rmSync(p, { force: true }));
    using loaded = await loadSafetensors(p, rt.device(0), { mover });
    assert.deepEqual(await deviceBytes(rt, loaded.allocation, loaded.tensors.get('t7')!.byteOffset, 8192), Buffer.alloc(8192, 8));
  }
  writeFileSync(p, file);
  // Into a destination of our own: after the failure, every byte outside the tensors' range is as it was.
  using dst = rt.device(0).alloc(file.byteLength + 4096);
  rt.fill(dst, 0xee);
  {
    using mover = faulty(rt, 4, async () => truncateSync(p, 30000));
    await assert.rejects(
      loadSafetensors(p, rt.device(0), { mover, into: { allocation: dst, offset: 1024 } }),
      (e) => e instanceof SafetensorsError && e.problem === 'truncated',
    );
  }
  const after = await deviceBytes(rt, dst, 0, dst.bytes);
  const need = 8 * 8192;
  assert.ok(
    after.subarray(0, 1024).every((x) => x === 0xee),
    'before the range',
  );
  assert.ok(
    after.subarray(1024 + need).every((x) => x === 0xee),
    'after the range',
  );
  assert.equal(dst.disposed, false, 'a destination given is never freed');
});

test('into a destination: placed at its offset; too small or of another device: refused before any read', async () => {
  using rt = host();
  const p = fresh();
  const tensors = [
    { name: 'x', dtype: 'F32' as const, shape: [100], data: Uint8Array.from({ length: 400 }, (_, i) => i & 0xff) },
    { name: 'y', dtype: 'U8' as const, shape: [50], data: new Uint8Array(50).fill(9) },
  ];
  writeFileSync(p, serializeSafetensors(tensors));
  let reads = 0;
  const counting = (inner: PinnedFileMover): FileMover => ({
    toDevice: (...a) => (reads++, inner.toDevice(...a)),
    toFile: inner.toFile,
    [Symbol.dispose]: () => inner[Symbol.dispose](),
  });
  using dst = rt.device(0).alloc(2048);
  rt.fill(dst, 0x55);
  {
    using mover = counting(new PinnedFileMover(rt));
    const loaded = await loadSafetensors(p, rt.device(0), { into: { allocation: dst, offset: 512 }, mover });
    loaded[Symbol.dispose]();
    assert.equal(dst.disposed, false);
    const x = loaded.tensors.get('x')!;
    assert.equal(x.byteOffset, 512);
    assert.deepEqual(await deviceBytes(rt, dst, 512, 400), Buffer.from(tensors[0]!.data));
    assert.deepEqual(await deviceBytes(rt, dst, 912, 50), Buffer.from(tensors[1]!.data));
    assert.ok(
      (await deviceBytes(rt, dst, 962, 2048 - 962)).every((b) => b === 0x55),
      'nothing written after the tensors',
    );
    reads = 0;
    await assert.rejects(loadSafetensors(p, rt.device(0), { into: { allocation: dst, offset: 1700 }, mover }), (e) => isGpuError(e, ErrorCode.OUT_OF_BOUNDS));
    using small = rt.device(0).alloc(100);
    await assert.rejects(loadSafetensors(p, rt.device(0), { into: small, mover }), (e) => isGpuError(e, ErrorCode.OUT_OF_BOUNDS));
    using other = rt.device(1).alloc(4096);
    await assert.rejects(loadSafetensors(p, rt.device(0), { into: other, mover }), (e) => isGpuError(e, ErrorCode.WRONG_DEVICE));
    await assert.rejects(
      loadSafetensors(p, rt.device(0), { filter: ['x', 'nope'], mover }),
      (e) => isGpuError(e, ErrorCode.INVALID_ARGUMENT) && /"nope"/.test(e.message),
    );
    assert.equal(reads, 0, 'no file range was read for a refused destination or filter');
  }
  assert.equal(rt.liveMemory().device.count, 1, 'only the destination is live: the refused loads allocated nothing');
});

test('from a pool: the allocation comes from the resource and goes back to it on dispose', async () => {
  using rt = host();
  const p = fresh();
  writeFileSync(p, serializeSafetensors([{ name: 'w', dtype: 'BF16', shape: [300], data: new Uint8Array(600).fill(3) }]));
  using pool = new CachingPool(new DeviceResource(rt.device(0)));
  let loaded: LoadedSafetensors | undefined = await loadSafetensors(p, rt.device(0), { resource: pool });
  const a = loaded.allocation;
  assert.deepEqual(await deviceBytes(rt, a, loaded.tensors.get('w')!.byteOffset, 600), Buffer.alloc(600, 3));
  loaded[Symbol.dispose]();
  assert.equal(a.disposed, true);
  loaded = undefined;
  await assert.rejects(loadSafetensors(p, rt.device(1), { resource: pool }), (e) => isGpuError(e, ErrorCode.WRONG_DEVICE));
});

test('an abort stops the load with ABORTED and frees what it took', async () => {
  using rt = host();
  const p = fresh();
  writeFileSync(p, serializeSafetensors([{ name: 'w', dtype: 'U8', shape: [100000], data: new Uint8Array(100000) }]));
  const ac = new AbortController();
  ac.abort();
  const fds = openFds();
  await assert.rejects(loadSafetensors(p, rt.device(0), { signal: ac.signal }), (e) => isGpuError(e, ErrorCode.ABORTED));
  await assert.rejects(loadSafetensors(p, 0 as never), (e) => isGpuError(e, ErrorCode.INVALID_ARGUMENT));
  await assert.rejects(loadSafetensors('', rt.device(0)), (e) => isGpuError(e, ErrorCode.INVALID_ARGUMENT));
  assert.equal(rt.liveMemory().device.count, 0);
  assert.equal(openFds(), fds);
});

test('saving: host buffers and device views together; bad input and failures leave no file behind', async () => {
  using rt = host();
  using dev = rt.device(0).alloc(1024);
  const devBytes = Uint8Array.from({ length: 256 }, (_, i) => 255 - i);
  await rt.upload(dev, devBytes, { dstOffset: 128 });
  const out = fresh('saved.safetensors');
  const hostBytes = new Float32Array([1, 2, 3]);
  const res = await saveSafetensors(
    out,
    { h: { dtype: 'F32', shape: [3], data: hostBytes }, d: { dtype: 'I16', shape: [128], data: { allocation: dev, byteOffset: 128 } } },
    { metadata: { by: 'test' } },
  );
  const expected = serializeSafetensors(
    [
      { name: 'h', dtype: 'F32', shape: [3], data: new Uint8Array(hostBytes.buffer) },
      { name: 'd', dtype: 'I16', shape: [128], data: devBytes },
    ],
    { by: 'test' },
  );
  assert.deepEqual(readFileSync(out), Buffer.from(expected));
  assert.equal(res.bytes, expected.byteLength);
  const folder = join(out, '..');
  const before = readdirSync(folder).sort();
  await assert.rejects(saveSafetensors(join(folder, 'bad.safetensors'), { h: { dtype: 'F32', shape: [4], data: hostBytes } }), (e) =>
    isGpuError(e, ErrorCode.INVALID_SIZE),
  );
  await assert.rejects(saveSafetensors(join(folder, 'bad.safetensors'), { d: { dtype: 'U8', shape: [2000], data: { allocation: dev } } }), (e) =>
    isGpuError(e, ErrorCode.OUT_OF_BOUNDS),
  );
  const failing: FileMover = {
    toDevice: () => Promise.reject(new Error('unused')),
    toFile: () => Promise.reject(Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })),
    [Symbol.dispose]: () => {},
  };
  await assert.rejects(
    saveSafetensors(out, { d: { dtype: 'U8', shape: [16], data: { allocation: dev } } }, { mover: failing }),
    (e) => isGpuError(e) && /ENOSPC/.test(e.message),
  );
  assert.deepEqual(readdirSync(folder).sort(), before, 'no partial or temporary file');
  assert.deepEqual(readFileSync(out), Buffer.from(expected), 'a failed save leaves the file it would have replaced as it was');
  assert.equal(rt.liveMemory().pinned.count, 0);
});

test('verifyLoaded finds every byte equal after a load, and names the tensor a changed byte is in', async () => {
  using rt = host();
  const p = fresh();
  const tensors = ['a', 'b', 'c'].map((name, i) => ({ name, dtype: 'U8' as const, shape: [1000], data: new Uint8Array(1000).fill(i + 1) }));
  writeFileSync(p, serializeSafetensors(tensors));
  using loaded = await loadSafetensors(p, rt.device(0));
  const good = await verifyLoaded(rt, loaded.tensors.values());
  assert.deepEqual(good, { ok: true, tensors: 3, bytes: 3000 });
  const b = loaded.tensors.get('b')!;
  rt.fill(loaded.allocation, 0, { offset: b.byteOffset + 700, bytes: 1 });
  const bad = await verifyLoaded(rt, loaded.tensors.values());
  assert.equal(bad.ok, false);
  assert.deepEqual(bad.mismatch, { name: 'b', byte: 700 });
});
