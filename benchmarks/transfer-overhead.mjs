// What each item of a list costs the transfer engine beyond its bytes, on this machine (no GPU needed): for each
// shape, one rt.uploadMany (its arrays landing in order, or in reverse order), downloadMany, or Promise.all of rt.upload,
// of COUNT separate arrays of EACH bytes, and, right after it through the same runtime, one transfer of a single
// COUNT x EACH buffer (the same bytes, one item).
//   per-item overhead = (time of the list - time of the one buffer) / COUNT
// counted per repeat two ways, each repeat's pair run back to back so that drift cancels: wall = the host clock
// (performance.now, call to settled promise); cpu = the CPU time the process spent meanwhile (process.cpuUsage, user
// + system, every thread of the process: the JS thread, V8's collector, the copier's threads), which a machine busy
// with other work inflates far less than the wall clock. Printed as the median over repeats with the min-max spread,
// in nanoseconds. Garbage collection is counted where it falls (it is part of what items cost). The arrays are
// filled once; every list lands whole (checked once per shape after the timed repeats).
//
//   node benchmarks/transfer-overhead.mjs [--backend host|hip-fake|cuda|hip] [--repeats 15] [--json]
//
// host: the host backend (the engine's JS, the host copier on the JS thread, "device" copies as JS copies).
// hip-fake: the real HIP backend over the fake ROCm 7.1 library of the tests (cc builds it): koffi calls, the
// copier's worker threads, hipMemcpyBatchAsync (a memcpy at the call). Neither is a GPU: the figures say what the
// engine's per-item path costs on this CPU, not what a device moves. cuda / hip: a real GPU, where the difference
// also holds what the device's copies of a list cost beyond one buffer's.
import { fromDist } from './dist.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const backendArg = opt('backend', 'host');
const repeats = Number(opt('repeats', '15'));
const json = args.includes('--json');
const KiB = 1024;

let fake;
if (backendArg === 'hip-fake') {
  const { FakeRocm, RELEASES, haveCompiler, useFakeEnvironment } = await fromDist('backend/hip/fake/fake-rocm.js');
  if (!haveCompiler()) {
    console.error('transfer-overhead: hip-fake needs a C compiler (cc) to build the fake ROCm library');
    process.exit(2);
  }
  fake = new FakeRocm();
  useFakeEnvironment({ GPUMEM_LIBAMDHIP64: fake.install('rocm-7.1.0', RELEASES['7.1']).hip });
} else if (!['host', 'cuda', 'hip'].includes(backendArg)) {
  console.error(`transfer-overhead: --backend host, hip-fake, cuda or hip, not ${backendArg}`);
  process.exit(2);
}
const { openRuntime } = await fromDist();
const rt = openRuntime(
  backendArg === 'host' ? { backend: 'host', host: { devices: 1, deviceBytes: 2 ** 30 } } : { backend: backendArg === 'hip-fake' ? 'hip' : backendArg },
);
const dev = rt.device(0);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function fill(u, seed) {
  const w = new Uint32Array(u.buffer, u.byteOffset, u.byteLength >> 2);
  for (let i = 0; i < w.length; i++) w[i] = (Math.imul(i + 1, 2654435761) ^ seed) >>> 0;
}

/** Wall-clock and process CPU milliseconds of one awaited call. */
const time = async (op) => {
  const c = process.cpuUsage();
  const t = performance.now();
  await op();
  const wall = performance.now() - t;
  const used = process.cpuUsage(c);
  return { wall, cpu: (used.user + used.system) / 1000 };
};

/** One shape: COUNT arrays of EACH bytes, three ways, each against one buffer of the same bytes. */
async function shape(count, each) {
  const total = count * each;
  const dst = dev.alloc(total);
  const arrays = Array.from({ length: count }, (_, i) => {
    const u = new Uint8Array(each);
    fill(u, i);
    return u;
  });
  // The one buffer is filled too (untouched memory reads as the zero page, far faster than real data).
  const whole = new Uint8Array(total);
  fill(whole, 7);
  const back = Array.from({ length: count }, () => new Uint8Array(each).fill(1));
  const ways = {
    uploadMany: [() => rt.uploadMany(arrays.map((src, i) => ({ dst, src, dstOffset: i * each }))), () => rt.upload(dst, whole, { path: 'staged' })],
    'uploadMany, reverse order': [
      () => rt.uploadMany(arrays.map((src, i) => ({ dst, src, dstOffset: (count - 1 - i) * each }))),
      () => rt.upload(dst, whole, { path: 'staged' }),
    ],
    downloadMany: [() => rt.downloadMany(back.map((b, i) => ({ dst: b, src: dst, srcOffset: i * each }))), () => rt.download(whole, dst, { path: 'staged' })],
    'Promise.all of rt.upload': [
      () => Promise.all(arrays.map((s, i) => rt.upload(dst, s, { dstOffset: i * each }))),
      () => rt.upload(dst, whole, { path: 'staged' }),
    ],
  };
  const rows = [];
  for (const [way, [list, one]] of Object.entries(ways)) {
    // Two untimed pairs: the ring pinned, the code paths compiled.
    for (let w = 0; w < 2; w++) {
      await list();
      await one();
    }
    const wall = [];
    const cpu = [];
    const listMs = [];
    for (let r = 0; r < repeats; r++) {
      const a = await time(list);
      const b = await time(one);
      listMs.push(a.wall);
      wall.push(((a.wall - b.wall) * 1e6) / count);
      cpu.push(((a.cpu - b.cpu) * 1e6) / count);
    }
    const stat = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
    rows.push({ way, count, each, wallNs: stat(wall), cpuNs: stat(cpu), listMs: median(listMs) });
  }
  // Every list lands whole: the uploads put each array at its place (in order, then reversed), the downloads brought each back.
  let ok = true;
  for (const place of [(i) => i, (i) => count - 1 - i]) {
    await rt.uploadMany(arrays.map((src, i) => ({ dst, src, dstOffset: place(i) * each })));
    for (const b of back) b.fill(0);
    await rt.downloadMany(back.map((b, i) => ({ dst: b, src: dst, srcOffset: place(i) * each })));
    ok &&= back.every((b, i) => Buffer.from(b.buffer).equals(Buffer.from(arrays[i].buffer)));
  }
  dst.free();
  return rows.map((r) => ({ ...r, verified: ok }));
}

// Small items first: there the bytes cost next to nothing and the difference is the items' alone; at 16 KiB it is a
// difference of two times ten times larger, and as noisy as they are.
const shapes = [
  [16384, 256],
  [16384, 4 * KiB],
  [16384, 16 * KiB],
];
const all = [];
for (const [count, each] of shapes) all.push(...(await shape(count, each)));
const label = { host: 'host backend', 'hip-fake': 'HIP backend over the fake ROCm 7.1 library', cuda: 'CUDA backend', hip: 'HIP backend' }[backendArg];
if (json) for (const r of all) console.log(JSON.stringify({ backend: backendArg, repeats, ...r }));
else {
  console.log(`per-item overhead of the transfer engine, ${label}, ${repeats} repeats`);
  console.log('ns per item beyond its bytes: median (min to max) of the repeats, by the wall clock and by process CPU time');
  console.log(
    `  counted per repeat as (time of the list - time of one buffer of the same bytes, run right after) / items; items: count arrays of each bytes, one ArrayBuffer each; list (wall): the list's median time`,
  );
  const cell = (s) => `${s.median.toFixed(0)} (${s.min.toFixed(0)} to ${s.max.toFixed(0)})`;
  console.log(`  ${'shape'.padEnd(14)} ${'way'.padEnd(26)} ${'wall ns'.padEnd(24)} ${'cpu ns'.padEnd(24)} list (wall)`);
  for (const r of all) {
    const size = r.each >= KiB ? `${r.each / KiB} KiB` : `${r.each} B`;
    const row = `  ${`${r.count} x ${size}`.padEnd(14)} ${r.way.padEnd(26)} ${cell(r.wallNs).padEnd(24)} ${cell(r.cpuNs).padEnd(24)}`;
    console.log(`${row} ${r.listMs.toFixed(1)} ms${r.verified ? '' : '  NOT VERIFIED'}`);
  }
}
rt[Symbol.dispose]();
fake?.dispose();
