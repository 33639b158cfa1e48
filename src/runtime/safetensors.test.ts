/**
 * safetensors files to device memory and back on the host backend, with real files: byte-exact loads of files built
 * here from the format's rules, round trips through the writer over random checkpoints and filters, sharded
 * checkpoints, destinations and pools, saving. The failures are in safetensors-faults.test.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode, isGpuError } from '../errors.js';
import { dtypeBits, parseSafetensors, SAFETENSORS_DTYPES, serializeSafetensors, type SafetensorsHostTensor } from '../formats/safetensors.js';
import { CachingPool, DeviceResource } from '../pool/index.js';
import { propertyParams } from '../testing/property.js';
import { openFds } from '../testing/harness.js';
import { deviceBytes, hostRuntime, scratchFolder, sharded, specFile } from '../testing/safetensors-files.js';
import { loadSafetensors, saveSafetensors, type LoadedSafetensors } from './safetensors.js';
import { PinnedFileMover, verifyLoaded, type FileMover } from './safetensors-io.js';

const { fresh, folder: newFolder } = scratchFolder();
const host = hostRuntime;

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

test('a sharded checkpoint loads through its index into one allocation; the index decides which tensors', async () => {
  using rt = host();
  const { folder, tensors } = sharded(newFolder());
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
