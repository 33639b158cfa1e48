/**
 * safetensors loads that go wrong, on the host backend with real files: lying headers, missing shards and bad
 * indexes, a FIFO, a file truncated, failing or removed during the read, an abort. Each ends in a typed error with
 * nothing left allocated, no pinned slot and no file descriptor open, and nothing written outside the destination.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../errors.js';
import { SafetensorsError, serializeSafetensors, type SafetensorsProblem } from '../formats/safetensors.js';
import type { Runtime } from './runtime.js';
import { openFds } from '../testing/harness.js';
import { deviceBytes, hostRuntime, refused, scratchFolder, sharded, specFile } from '../testing/safetensors-files.js';
import { loadSafetensors } from './safetensors.js';
import { PinnedFileMover, type FileMover } from './safetensors-io.js';

const { dir, fresh, folder: newFolder } = scratchFolder();
const host = hostRuntime;

test('a missing shard, a shard without a tensor its index names, a bad index: refused before any allocation', async () => {
  using rt = host();
  const a = sharded(newFolder());
  rmSync(join(a.folder, 'model-00002-of-00002.safetensors'));
  const e = await refused(rt, () => loadSafetensors(a.folder, rt.device(0)), 'missing-shard');
  assert.match(e.message, /model-00002-of-00002\.safetensors.*no such file/);
  const b = sharded(newFolder());
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
  const empty = newFolder();
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
