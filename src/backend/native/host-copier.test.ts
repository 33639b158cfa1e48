/**
 * The threaded host copier on real memory and real files: ArrayBuffers addressed through koffi, copied by worker
 * threads calling libc memcpy, pread and pwrite. Byte-exact over random sizes and offsets, gathers of many small
 * copies, more copies in flight than the mailboxes hold, reads past the end of a file, failing descriptors, disposal.
 */
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../../testing/property.js';
import { DisposedError, ErrorCode, GpuError } from '../../errors.js';
import { addressOf } from './ffi.js';
import { ThreadedHostCopier } from './host-copier.js';
import { MAX_GROUPS } from './host-copier-layout.js';

function pattern(n: number, seed: number): Uint8Array {
  const u = new Uint8Array(n);
  for (let i = 0; i < n; i++) u[i] = (i * 31 + seed) & 0xff;
  return u;
}

test('copies land byte-exact at any size and offset, split over the threads, nothing written outside', async () => {
  const copier = new ThreadedHostCopier(3);
  try {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 << 20 }), fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 5000 }), async (n, so, dO) => {
        const src = pattern(n + so, n & 0xff);
        const dst = new Uint8Array(n + dO + 64).fill(0xee);
        await copier.copy(addressOf(dst.buffer as ArrayBuffer) + dO, addressOf(src.buffer as ArrayBuffer) + so, n);
        assert.deepEqual(dst.subarray(dO, dO + n), src.subarray(so, so + n));
        assert.ok(
          dst.subarray(0, dO).every((b) => b === 0xee),
          'nothing before',
        );
        assert.ok(
          dst.subarray(dO + n).every((b) => b === 0xee),
          'nothing after',
        );
      }),
      propertyParams(60),
    );
  } finally {
    copier.dispose();
  }
});

test('more copies in flight than the mailboxes hold are queued and all settle, in any order of completion', async () => {
  const copier = new ThreadedHostCopier(2);
  try {
    const n = 3 * MAX_GROUPS + 5;
    const srcs = Array.from({ length: n }, (_, i) => pattern(8192 + i * 13, i));
    const dsts = srcs.map((s) => new Uint8Array(s.length));
    await Promise.all(srcs.map((s, i) => copier.copy(addressOf(dsts[i]!.buffer as ArrayBuffer), addressOf(s.buffer as ArrayBuffer), s.length)));
    for (let i = 0; i < n; i++) assert.deepEqual(dsts[i], srcs[i], `copy ${i}`);
  } finally {
    copier.dispose();
  }
});

test('threads that sleep between requests are all woken for each one (the JS thread wakes one, they wake each other)', { timeout: 120_000 }, async () => {
  // No spinning: every thread sleeps as soon as its mailbox is empty, so each request finds them all asleep.
  const was = process.env.GPUMEM_COPIER_SPIN_US;
  process.env.GPUMEM_COPIER_SPIN_US = '0';
  const copier = new ThreadedHostCopier(6);
  if (was === undefined) delete process.env.GPUMEM_COPIER_SPIN_US;
  else process.env.GPUMEM_COPIER_SPIN_US = was;
  try {
    await copier.ready;
    for (let round = 0; round < 40; round++) {
      // Large enough to be cut into a part per thread; then a gather of small copies, a part of them each.
      const src = pattern((6 << 20) + round * 4099, round);
      const dst = new Uint8Array(src.length);
      await new Promise((r) => setTimeout(r, 1));
      await copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(src.buffer as ArrayBuffer), src.length);
      assert.deepEqual(dst, src, `round ${round}: every part landed`);
      const smalls = Array.from({ length: 96 }, (_, i) => pattern(64 * 1024 + i, round + i));
      const outs = smalls.map((x) => new Uint8Array(x.length));
      await new Promise((r) => setTimeout(r, 1));
      await copier.copyMany(
        outs.map((o) => addressOf(o.buffer as ArrayBuffer)),
        smalls.map((x) => addressOf(x.buffer as ArrayBuffer)),
        smalls.map((x) => x.length),
      );
      outs.forEach((o, i) => assert.deepEqual(o, smalls[i], `round ${round}: gathered copy ${i}`));
    }
  } finally {
    copier.dispose();
  }
});

test('dispose waits for copies already started and refuses new ones; disposing twice is harmless', async () => {
  const copier = new ThreadedHostCopier(2);
  const src = pattern(32 << 20, 7);
  const dst = new Uint8Array(src.length);
  const running = copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(src.buffer as ArrayBuffer), src.length);
  copier.dispose();
  await running;
  assert.deepEqual(dst, src, 'the copy in flight finished before dispose returned');
  await assert.rejects(copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(src.buffer as ArrayBuffer), 16), DisposedError);
  copier.dispose();
});

test('a gather of many small copies lands each byte-exact, whatever the mix of sizes and the thread count', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 200_000 }), { minLength: 1, maxLength: 700 }),
      fc.integer({ min: 1, max: 4 }),
      async (sizes, threads) => {
        const copier = new ThreadedHostCopier(threads);
        try {
          const total = sizes.reduce((a, b) => a + b, 0);
          const packed = new Uint8Array(total + 64).fill(0xee);
          const srcs = sizes.map((n, i) => pattern(n, i));
          let at = 0;
          const dsts: number[] = [];
          const base = addressOf(packed.buffer as ArrayBuffer);
          for (const n of sizes) {
            dsts.push(base + at);
            at += n;
          }
          await copier.copyMany(
            dsts,
            srcs.map((s) => addressOf(s.buffer as ArrayBuffer)),
            sizes,
          );
          at = 0;
          sizes.forEach((n, i) => {
            assert.deepEqual(packed.subarray(at, at + n), srcs[i], `copy ${i}`);
            at += n;
          });
          assert.ok(
            packed.subarray(total).every((b) => b === 0xee),
            'nothing after the last copy',
          );
        } finally {
          copier.dispose();
        }
      },
    ),
    propertyParams(15),
  );
});

test('file reads and writes on the threads: byte-exact at any offset, a short file is an IO_ERROR naming where it ended', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-copier-'));
  const copier = new ThreadedHostCopier(3);
  try {
    const data = pattern(3 << 20, 9);
    const dst = new Uint8Array(1 << 20);
    const path = join(dir, 'data.bin');
    writeFileSync(path, data);
    const fd = openSync(path, 'r');
    try {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 0, max: (3 << 20) - 1 }), fc.integer({ min: 1, max: 3 << 20 }), async (off, len) => {
          const n = Math.min(len, data.length - off);
          const got = new Uint8Array(n + 16).fill(0xee);
          await copier.readFile(fd, addressOf(got.buffer as ArrayBuffer), n, off);
          assert.deepEqual(got.subarray(0, n), data.subarray(off, off + n));
          assert.ok(
            got.subarray(n).every((b) => b === 0xee),
            'nothing after',
          );
        }),
        propertyParams(30),
      );
      // Past the end: the bytes that exist land, and the read fails with the offset where the file ended.
      await assert.rejects(copier.readFile(fd, addressOf(dst.buffer as ArrayBuffer), 1 << 20, data.length - 1000), (e: unknown) => {
        assert.ok(e instanceof GpuError && e.code === ErrorCode.IO_ERROR, String(e));
        assert.equal(e.statusName, 'EOF');
        assert.match(e.message, new RegExp(`ended at byte ${data.length}\\b`));
        return true;
      });
      // Fewer bytes needed than asked (the rest is alignment padding): no failure.
      await copier.readFile(fd, addressOf(dst.buffer as ArrayBuffer), 8192, data.length - 4096, 4096);
      assert.deepEqual(dst.subarray(0, 4096), data.subarray(data.length - 4096));
    } finally {
      closeSync(fd);
    }
    // A write, then read back by Node.
    const out = join(dir, 'out.bin');
    const wfd = openSync(out, 'w');
    try {
      await copier.writeFile(wfd, addressOf(data.buffer as ArrayBuffer) + 5, data.length - 5, 100);
    } finally {
      closeSync(wfd);
    }
    const back = readFileSync(out);
    assert.equal(back.length, data.length - 5 + 100);
    assert.deepEqual(new Uint8Array(back.subarray(100)), data.subarray(5));
    // A descriptor that cannot be read: the errno's name, never a crash.
    const wo = openSync(out, 'w');
    try {
      await assert.rejects(copier.readFile(wo, addressOf(dst.buffer as ArrayBuffer), 4096, 0), (e: unknown) => {
        return e instanceof GpuError && e.code === ErrorCode.IO_ERROR && e.statusName === 'EBADF';
      });
    } finally {
      closeSync(wo);
    }
    // The copier goes on working after failures.
    await copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(data.buffer as ArrayBuffer), 4096);
    assert.deepEqual(dst.subarray(0, 4096), data.subarray(0, 4096));
  } finally {
    copier.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('O_DIRECT reads into page-aligned memory land byte-exact, a tail past the end included; the page cache share is told', async () => {
  const { constants, fsyncSync } = await import('node:fs');
  const { libcIo, FADV } = await import('./host-io/ffi.js');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-direct-'));
  const copier = new ThreadedHostCopier(2);
  try {
    const size = (1 << 20) + 1234; // not a whole number of pages: the last O_DIRECT read ends early
    const data = pattern(size, 3);
    const path = join(dir, 'd.bin');
    writeFileSync(path, data);
    const w = openSync(path, 'r');
    fsyncSync(w);
    closeSync(w);
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_DIRECT);
    } catch {
      return; // this file system refuses O_DIRECT: the engine falls back to buffered reads there (file-source.ts)
    }
    try {
      const room = new ArrayBuffer(size + 3 * 4096);
      const base = addressOf(room);
      const aligned = Math.ceil(base / 4096) * 4096;
      const alignedBytes = Math.ceil(size / 4096) * 4096;
      await copier.readFile(fd, aligned, alignedBytes, 0, size);
      assert.deepEqual(new Uint8Array(room, aligned - base, size), data);
      // Dropped from the cache, the range is told as not cached; read through the cache, as cached.
      assert.equal(libcIo().fadvise(fd, 0, size, FADV.DONTNEED), 0);
      const cold = copier.cachedShare(fd, 0, size);
      assert.ok(cold !== undefined && cold < 0.5, `after DONTNEED: ${cold}`);
      readFileSync(path);
      const warm = copier.cachedShare(fd, 0, size);
      assert.ok(warm !== undefined && warm > 0.5, `after a read: ${warm}`);
    } finally {
      closeSync(fd);
    }
  } finally {
    copier.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('copiers disposed while their threads still load koffi: the process neither aborts nor keeps a thread', async () => {
  // Terminating a thread inside koffi's native initialisation aborts the process, so this runs in a child process,
  // where an abort shows as a signal instead of taking the test runner down.
  const { spawnSync } = await import('node:child_process');
  const url = new URL('./host-copier.js', import.meta.url).href;
  const script = `
    const { ThreadedHostCopier } = await import(${JSON.stringify(url)});
    const hold = setInterval(() => {}, 1000); // the threads are unref'd: keep the loop alive while waiting for them
    for (let i = 0; i < 60; i++) {
      const c = new ThreadedHostCopier(3);
      await new Promise((r) => setTimeout(r, i % 30)); // some threads not started yet, some loading, some up
      c.dispose();
    }
    const c = new ThreadedHostCopier(2);
    await c.ready;
    c.dispose();
    clearInterval(hold);
    console.log('done');
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.signal, null, `the child was killed by ${r.signal}: ${r.stderr.slice(0, 400)}`);
  assert.equal(r.status, 0, r.stderr.slice(0, 400));
  assert.equal(r.stdout.trim(), 'done', 'and it exited by itself: no thread left running');
});
