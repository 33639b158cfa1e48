/**
 * Files to and from device memory, run on every backend with a device: uploadFile byte-exact over file sizes,
 * offsets, lengths and chunk sizes, from a path, a FileHandle or a descriptor; downloadFile round trips that leave the
 * rest of the file alone; every bad argument refused before anything is read, with nothing written past a
 * destination and no descriptor left open; a file truncated during the read; an abort. Real files in a temporary
 * folder; nothing timed.
 */
import assert from 'node:assert/strict';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { open as openHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode, GpuError } from '../errors.js';
import type { Runtime } from '../runtime/runtime.js';
import { propertyParams } from '../testing/property.js';
import { holdDeviceCopy } from './hold.js';
import { openFds } from '../testing/harness.js';
import { code, pattern } from './transfer.case.js';

const KiB = 1024;

export function fileConformance(label: string, open: () => Runtime): void {
  const withDir = (name: string, fn: (rt: Runtime, dir: string) => Promise<void>): void => {
    test(`${label}: ${name}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'gpumem-file-'));
      try {
        using rt = open();
        await fn(rt, dir);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  };

  withDir('uploadFile lands any range of a file byte-exact at any destination offset, from a path, a FileHandle or a descriptor', async (rt, dir) => {
    const gpu = rt.device(0);
    const fdsBefore = openFds(dir);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 * KiB }),
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 0, max: 5000 }),
        fc.constantFrom(4 * KiB, 8 * KiB + 512, 64 * KiB),
        fc.constantFrom('path', 'handle', 'fd'),
        async (size, a, b, dstOffset, chunkBytes, how) => {
          const offset = a % size;
          const bytes = 1 + (b % (size - offset));
          const data = pattern(size, size & 0xff);
          const path = join(dir, 'f.bin');
          writeFileSync(path, data);
          using st = rt.createStager({ chunkBytes, depth: 3, threads: 2 });
          using dst = gpu.alloc(dstOffset + bytes + 100);
          rt.fill(dst, 0xee);
          const handle = how === 'handle' ? await openHandle(path, 'r') : undefined;
          const fd = how === 'fd' ? openSync(path, 'r') : undefined;
          try {
            const r = await st.uploadFile(dst, handle ?? fd ?? path, { offset, bytes, dstOffset });
            assert.equal(r.bytes, bytes);
            assert.ok(['buffered', 'direct'].includes(r.path), r.path);
            const out = new Uint8Array(dstOffset + bytes + 100);
            await st.download(out, dst);
            assert.deepEqual(out.subarray(dstOffset, dstOffset + bytes), data.subarray(offset, offset + bytes));
            assert.ok(
              out.subarray(0, dstOffset).every((x) => x === 0xee),
              'nothing before the destination range',
            );
            assert.ok(
              out.subarray(dstOffset + bytes).every((x) => x === 0xee),
              'nothing after it',
            );
          } finally {
            await handle?.close();
            if (fd !== undefined) closeSync(fd);
          }
        },
      ),
      propertyParams(30),
    );
    assert.equal(openFds(dir), fdsBefore, 'every descriptor gpumem opened was closed');
  });

  withDir('downloadFile writes device memory into a file at an offset and leaves the rest of the file as it was', async (rt, dir) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 16 * KiB, depth: 2, threads: 2 });
    const n = 200 * KiB + 3;
    using src = gpu.alloc(n + 50);
    await st.upload(src, pattern(n + 50, 5));
    const path = join(dir, 'out.bin');
    writeFileSync(path, new Uint8Array(300 * KiB).fill(0x33));
    const r = await st.downloadFile(path, src, { offset: 1000, srcOffset: 50, bytes: n });
    assert.equal(r.direction, 'download');
    assert.equal(r.path, 'buffered');
    const back = new Uint8Array(readFileSync(path));
    assert.equal(back.length, 300 * KiB, 'not truncated');
    assert.deepEqual(back.subarray(1000, 1000 + n), pattern(n + 50, 5).subarray(50));
    assert.ok(back.subarray(0, 1000).every((x) => x === 0x33));
    assert.ok(back.subarray(1000 + n).every((x) => x === 0x33));
    // cuFile asked for where it cannot run (no NVIDIA backend, no libcufile, or a registration it refuses): the
    // ring's way (O_DIRECT reads where the file was opened for cuFile), with the reason.
    using viaCufile = gpu.alloc(n + 50);
    const asked = await rt.uploadFile(viaCufile, path, { offset: 1000, bytes: n, path: 'cufile' });
    if (asked.path !== 'cufile') {
      assert.ok(asked.path === 'buffered' || asked.path === 'direct', asked.path);
      assert.match(asked.fallback ?? '', /cuFile/);
    }
    const viaBack = new Uint8Array(n);
    await rt.download(viaBack, viaCufile, { bytes: n });
    assert.deepEqual(viaBack, pattern(n + 50, 5).subarray(50));
    // A new file, written whole, then read back by uploadFile.
    const fresh = join(dir, 'fresh.bin');
    await rt.downloadFile(fresh, src);
    using again = gpu.alloc(n + 50);
    await rt.uploadFile(again, fresh);
    const check = new Uint8Array(n + 50);
    await rt.download(check, again);
    assert.deepEqual(check, pattern(n + 50, 5));
  });

  withDir('bad files and ranges are refused before anything is read: typed errors, nothing written, no descriptor left open', async (rt, dir) => {
    const gpu = rt.device(0);
    using dst = gpu.alloc(64 * KiB);
    rt.fill(dst, 0x5a);
    const path = join(dir, 'data.bin');
    writeFileSync(path, pattern(100 * KiB, 1));
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    mkdirSync(join(dir, 'sub'));
    const fds = openFds(dir);
    // A FIFO is refused without blocking (opening one for reading would wait for a writer).
    await assert.rejects(rt.uploadFile(dst, fifo, { bytes: 16 }), (e: unknown) => code(ErrorCode.INVALID_ARGUMENT)(e) && /a FIFO/.test(String(e)));
    const fifoFd = openSync(fifo, 'r+');
    await assert.rejects(rt.uploadFile(dst, fifoFd, { bytes: 16 }), /a FIFO/);
    closeSync(fifoFd);
    await assert.rejects(rt.uploadFile(dst, join(dir, 'sub')), /a directory/);
    await assert.rejects(rt.uploadFile(dst, join(dir, 'missing.bin')), (e: unknown) => code(ErrorCode.IO_ERROR)(e) && (e as GpuError).statusName === 'ENOENT');
    await assert.rejects(rt.uploadFile(dst, path, { offset: 100 * KiB - 10, bytes: 11 }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.uploadFile(dst, path, { offset: 200 * KiB }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.uploadFile(dst, path), code(ErrorCode.OUT_OF_BOUNDS), 'a destination too small for the whole file');
    await assert.rejects(rt.uploadFile(dst, path, { bytes: 4 * KiB, dstOffset: 62 * KiB }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.uploadFile(dst, path, { bytes: 0 }), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.uploadFile(dst, path, { bytes: 1.5 }), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.uploadFile(dst, path, { path: 'fast' as 'auto' }), code(ErrorCode.INVALID_ARGUMENT));
    await assert.rejects(rt.uploadFile(dst, -1), code(ErrorCode.INVALID_ARGUMENT));
    await assert.rejects(rt.uploadFile(dst, 2 ** 30), (e: unknown) => code(ErrorCode.IO_ERROR)(e) && (e as GpuError).statusName === 'EBADF');
    await assert.rejects(rt.uploadFile(dst, {} as unknown as string), code(ErrorCode.INVALID_ARGUMENT));
    const closed = await openHandle(path, 'r');
    await closed.close();
    await assert.rejects(rt.uploadFile(dst, closed), /closed/);
    await assert.rejects(rt.uploadFile(dst, ''), code(ErrorCode.INVALID_ARGUMENT));
    using pinned = rt.allocPinned(4 * KiB);
    await assert.rejects(rt.uploadFile(pinned, path, { bytes: 16 }), /expected device or managed memory/);
    await assert.rejects(rt.downloadFile(path, dst, { bytes: 128 * KiB }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.downloadFile(join(dir, 'sub'), dst), /a directory/);
    assert.equal(openFds(dir), fds, 'no descriptor left open');
    const out = new Uint8Array(64 * KiB);
    await rt.download(out, dst);
    assert.ok(
      out.every((x) => x === 0x5a),
      'nothing was written by the refused transfers',
    );
    assert.equal(dst.busy, false);
  });

  withDir('a file truncated during the read fails with IO_ERROR where it ended; nothing lands past the destination; the stager goes on', async (rt, dir) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 16 * KiB, depth: 2, threads: 2 });
    const path = join(dir, 'shrinking.bin');
    const data = pattern(256 * KiB, 3);
    writeFileSync(path, data);
    using dst = gpu.alloc(300 * KiB);
    rt.fill(dst, 0xee);
    const fds = openFds(dir);
    // The first chunk's device copy waits while the file is cut to 40 KiB: the reads after it find the end early.
    const hold = holdDeviceCopy(st, 1);
    const p = st.uploadFile(dst, path, { dstOffset: 10 * KiB });
    await hold.reached;
    truncateSync(path, 40 * KiB);
    hold.release();
    await assert.rejects(p, (e: unknown) => {
      assert.ok(e instanceof GpuError && e.code === ErrorCode.IO_ERROR, String(e));
      assert.equal(e.statusName, 'EOF');
      assert.match(e.message, /ended at byte 40960\b/);
      return true;
    });
    assert.equal(openFds(dir), fds, 'the file was closed');
    assert.equal(dst.busy, false);
    const out = new Uint8Array(300 * KiB);
    await st.download(out, dst);
    assert.ok(
      out.subarray(0, 10 * KiB).every((x) => x === 0xee),
      'nothing before the destination range',
    );
    assert.ok(
      out.subarray(10 * KiB + 256 * KiB).every((x) => x === 0xee),
      'nothing past it',
    );
    assert.deepEqual(out.subarray(10 * KiB, 26 * KiB), data.subarray(0, 16 * KiB), 'the chunk read before the cut landed');
    // The stager reads the next file whole.
    writeFileSync(path, data);
    await st.uploadFile(dst, path);
    await st.download(out, dst, { bytes: 256 * KiB });
    assert.deepEqual(out.subarray(0, 256 * KiB), data);
  });

  withDir(
    'a file unlinked during the read is read to its end (the open descriptor keeps it); an aborted read stops after the chunks in flight',
    async (rt, dir) => {
      const gpu = rt.device(0);
      using st = rt.createStager({ chunkBytes: 16 * KiB, depth: 2, threads: 2 });
      const path = join(dir, 'vanishing.bin');
      const data = pattern(128 * KiB, 4);
      writeFileSync(path, data);
      using dst = gpu.alloc(128 * KiB);
      const fds = openFds(dir);
      const hold = holdDeviceCopy(st, 1);
      const p = st.uploadFile(dst, path);
      await hold.reached;
      unlinkSync(path);
      hold.release();
      await p;
      const out = new Uint8Array(128 * KiB);
      await st.download(out, dst);
      assert.deepEqual(out, data);
      assert.equal(openFds(dir), fds, 'the descriptor of the vanished file was closed');
      writeFileSync(path, data);
      rt.fill(dst, 0);
      const ac = new AbortController();
      const held = holdDeviceCopy(st, 2);
      const q = st.uploadFile(dst, path, { signal: ac.signal });
      await held.reached;
      ac.abort();
      held.release();
      await assert.rejects(q, code(ErrorCode.ABORTED));
      await st.download(out, dst);
      assert.ok(out.subarray(16 * KiB).every((x) => x === 0));
      assert.equal(openFds(dir), fds);
    },
  );

  withDir('a file larger than a JS buffer may be is read in range pieces; the size limit is the device memory, not 2 GiB', async (rt, dir) => {
    // A sparse file of 3 GiB: reading a range beyond 2 GiB exercises offsets a 32-bit length could not hold.
    const path = join(dir, 'sparse.bin');
    const fd = openSync(path, 'w');
    const tail = pattern(64 * KiB, 9);
    try {
      writeFileSync(fd, tail, { flag: 'w' });
    } finally {
      closeSync(fd);
    }
    truncateSync(path, 3 * 2 ** 30);
    const w = openSync(path, 'r+');
    try {
      const { writeSync } = await import('node:fs');
      writeSync(w, tail, 0, tail.length, 3 * 2 ** 30 - 64 * KiB);
    } finally {
      closeSync(w);
    }
    using dst = rt.device(0).alloc(64 * KiB);
    const r = await rt.uploadFile(dst, path, { offset: 3 * 2 ** 30 - 64 * KiB });
    assert.equal(r.bytes, 64 * KiB);
    const out = new Uint8Array(64 * KiB);
    await rt.download(out, dst);
    assert.deepEqual(out, tail);
  });
}
