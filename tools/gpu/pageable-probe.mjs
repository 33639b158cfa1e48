// Why are pageable uploads slower through gpumem than from C? Compares the same cudaMemcpyAsync (pageable -> device,
// timed with events like the native yardstick) from: a JS ArrayBuffer (allocPageable), libc malloc + memset, and an
// ArrayBuffer after madvise(MADV_HUGEPAGE). Run from the bundle: bash .gpu/run.sh node /abs/tools/gpu/pageable-probe.mjs
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const require = createRequire(`${process.cwd()}/`);
const koffi = require('koffi');
const { openRuntime } = await import(pathToFileURL(`${process.cwd()}/dist/index.js`).href);
for (const f of ['/sys/kernel/mm/transparent_hugepage/enabled', '/sys/kernel/mm/transparent_hugepage/defrag']) {
  try { console.log(f, readFileSync(f, 'utf8').trim()); } catch { console.log(f, 'unreadable'); }
}
const libc = koffi.load('libc.so.6');
const malloc = libc.func('uintptr_t malloc(size_t n)');
const memset = libc.func('uintptr_t memset(uintptr_t p, int c, size_t n)');
const madvise = libc.func('int madvise(uintptr_t p, size_t n, int advice)');
const rt = openRuntime({ backend: 'cuda' });
const d = rt.device(0);
const n = 1 << 30;
const dev = d.alloc(n);
const s = d.createStream({ nonBlocking: true });
const a = d.createEvent(), b = d.createEvent();
const be = rt.backend;
async function time(label, src, bytes) {
  for (let i = 0; i < 3; i++) be.memcpyAsync(dev.address, src, bytes, 1, s.handle);
  await s.synchronize();
  const t = [];
  for (let i = 0; i < 10; i++) {
    be.recordEvent(a.handle, s.handle); be.memcpyAsync(dev.address, src, bytes, 1, s.handle); be.recordEvent(b.handle, s.handle);
    await b.synchronize(); t.push(be.elapsedMs(a.handle, b.handle));
  }
  t.sort((x, y) => x - y);
  console.log(`${label.padEnd(34)} ${String(bytes).padStart(11)}  ${(bytes / t[5] / 1e6).toFixed(2)} GB/s  (src % 4096 = ${src % 4096})`);
}
const ab = rt.allocPageable(n); ab.view().fill(7);
const m = malloc(n + 4096); memset(m, 7, n + 4096);
const ab2 = new ArrayBuffer(n + (2 << 20)); const base = koffi.address(ab2);
const aligned = Number((base + BigInt(2 << 20) - 1n) & ~BigInt((2 << 20) - 1));
console.log('madvise rc', madvise(aligned, n, 14)); new Uint8Array(ab2).fill(7);
const ab3 = new ArrayBuffer(n); new Uint8Array(ab3).fill(7); const a3 = Number(koffi.address(ab3));
for (const bytes of [16 << 20, 256 << 20, 1 << 30]) {
  await time('ArrayBuffer (allocPageable)', ab.address, bytes);
  await time('libc malloc + memset', m, bytes);
  await time('libc malloc, 4096-aligned', Number((BigInt(m) + 4095n) & ~4095n), bytes);
  await time('ArrayBuffer + MADV_HUGEPAGE', aligned, bytes);
  await time('ArrayBuffer (second, fresh)', a3, bytes);
}
