// Where small copies lose time from JavaScript: the same copy (64 KiB .. 1 MiB, pinned H2D / D2H, D2D) timed in
// several ways on one stream, median of 41 runs each, microseconds per copy:
//   raw-koffi   cudaEventRecord / cudaMemcpyAsync / cudaEventRecord bound here directly (the C yardstick's loop)
//   gpumem      gpumem's events and prepared copy (what `bench` does, as-native timing)
//   gpumem-warm the same after 3000 warm-up runs (JIT-compiled)
//   waitvalue   the same three calls behind cuStreamWaitValue32 on a mapped word (device time, no kernel in front)
//   graph       a captured graph [event, copy, event], one cudaGraphLaunch per run (device time)
//   batch20     event, 20 copies, event (per copy; back-to-back throughput)
// and the host time of one record+copy+record from JS. Run: node tools/gpu/small-copy-probe.mjs
import koffi from 'koffi';
import { openRuntime } from '../../dist/index.js';

const rt = openRuntime({ backend: 'cuda' });
const dev = rt.device(0);
const lib = (role) => rt.backend.libraries.find((l) => l.role === role);
const cudart = koffi.load(lib('runtime').path ?? lib('runtime').name);
const cuda = koffi.load(lib('driver').path ?? lib('driver').name);
const f = {
  rec: cudart.func('int cudaEventRecord(uintptr_t e, uintptr_t s)'),
  recF: cudart.func('int cudaEventRecordWithFlags(uintptr_t e, uintptr_t s, unsigned int flags)'),
  cpy: cudart.func('int cudaMemcpyAsync(uintptr_t d, uintptr_t s, size_t n, int kind, uintptr_t st)'),
  sync: cudart.func('int cudaEventSynchronize(uintptr_t e)'),
  ssync: cudart.func('int cudaStreamSynchronize(uintptr_t s)'),
  el: cudart.func('int cudaEventElapsedTime(_Out_ float *ms, uintptr_t a, uintptr_t b)'),
  begin: cudart.func('int cudaStreamBeginCapture(uintptr_t s, int mode)'),
  end: cudart.func('int cudaStreamEndCapture(uintptr_t s, _Out_ uintptr_t *g)'),
  inst: cudart.func('int cudaGraphInstantiate(_Out_ uintptr_t *ge, uintptr_t g, unsigned long long flags)'),
  launch: cudart.func('int cudaGraphLaunch(uintptr_t ge, uintptr_t s)'),
  hostPtr: cudart.func('int cudaHostGetDevicePointer(_Out_ uintptr_t *d, uintptr_t h, unsigned int flags)'),
  wait: cuda.func('int cuStreamWaitValue32_v2(uintptr_t s, uintptr_t addr, uint32_t value, unsigned int flags)'),
};
const ck = (r, what) => {
  if (r !== 0) throw new Error(`${what} -> ${r}`);
};
const MiB = 1 << 20;
const top = MiB;
const a = dev.alloc(top);
const b = dev.alloc(top);
const pinned = rt.allocPinned(top);
const flag = rt.allocMapped(64);
const word = flag.typed(Uint32Array, 0, 1);
const dptr = [0];
ck(f.hostPtr(dptr, flag.address, 0), 'cudaHostGetDevicePointer');
const s = dev.createStream({ nonBlocking: true });
const e0 = dev.createEvent();
const e1 = dev.createEvent();
const S = s.handle;
const E0 = e0.handle;
const E1 = e1.handle;
const ms = [0];
const REPS = 41;
const median = (xs) => xs.sort((x, y) => x - y)[xs.length >> 1];

function time(run, per = 1, warm = 3) {
  for (let i = 0; i < warm; i++) {
    run();
    if (i % 100 === 99) ck(f.ssync(S), 'sync');
  }
  ck(f.ssync(S), 'sync');
  const out = [];
  for (let i = 0; i < REPS; i++) {
    run();
    ck(f.sync(E1), 'eventSync');
    ck(f.el(ms, E0, E1), 'elapsed');
    out.push((ms[0] * 1000) / per);
  }
  return median(out);
}

const cases = [];
for (const n of [64 * 1024, 256 * 1024, MiB]) {
  cases.push(['H2D_pinned', n, a.address, pinned.address, 1, (o) => rt.prepareCopy(a, pinned, { bytes: n, stream: s })]);
  cases.push(['D2H_pinned', n, pinned.address, a.address, 2, () => rt.prepareCopy(pinned, a, { bytes: n, stream: s })]);
  cases.push(['D2D', n, b.address, a.address, 3, () => rt.prepareCopy(b, a, { bytes: n, stream: s })]);
}
// Host cost per call, steady state (JIT warm): event record and a 4-byte device copy, raw and through gpumem.
{
  const tiny = rt.prepareCopy(b, a, { bytes: 4, stream: s });
  const per = (fn) => {
    for (let k = 0; k < 3; k++) {
      for (let i = 0; i < 2000; i++) fn();
      ck(f.ssync(S), 'sync');
    }
    const xs = [];
    for (let k = 0; k < 21; k++) {
      const t0 = performance.now();
      for (let i = 0; i < 500; i++) fn();
      xs.push(((performance.now() - t0) * 1000) / 500);
      ck(f.ssync(S), 'sync');
    }
    return median(xs).toFixed(3);
  };
  console.log(`host us per call (median of 21 x 500): raw cudaEventRecord ${per(() => f.rec(E0, S))}, gpumem event.record ${per(() => e0.record(s))}, raw cudaMemcpyAsync 4 B D2D ${per(() => f.cpy(b.address, a.address, 4, 3, S))}, gpumem prepared copy ${per(() => tiny.run())}`);
}
console.log('copy\tbytes\traw-koffi us\tgpumem us\tgpumem-warm us\twaitvalue us\tgraph us\tbatch20 us\thost submit us\t(GB/s, raw / gpumem / gpumem-warm / waitvalue / graph / batch20)');
for (const [name, n, dst, src, kind] of cases.map((c) => c)) {
  const prepared = cases.find((c) => c[0] === name && c[1] === n)[5]();
  const raw = time(() => {
    f.rec(E0, S);
    f.cpy(dst, src, n, kind, S);
    f.rec(E1, S);
  });
  const gm = time(() => {
    e0.record(s);
    prepared.run();
    e1.record(s);
  });
  const gmWarm = time(() => {
    e0.record(s);
    prepared.run();
    e1.record(s);
  }, 1, 3000);
  const wv = time(() => {
    word[0] = 0;
    ck(f.wait(S, dptr[0], 1, 0), 'cuStreamWaitValue32');
    f.rec(E0, S);
    f.cpy(dst, src, n, kind, S);
    f.rec(E1, S);
    word[0] = 1;
  });
  ck(f.begin(S, 2), 'beginCapture'); // cudaStreamCaptureModeRelaxed
  ck(f.recF(E0, S, 1), 'record external');
  ck(f.cpy(dst, src, n, kind, S), 'captured copy');
  ck(f.recF(E1, S, 1), 'record external');
  const g = [0];
  ck(f.end(S, g), 'endCapture');
  const ge = [0];
  ck(f.inst(ge, g[0], 0), 'instantiate');
  const gr = time(() => ck(f.launch(ge[0], S), 'graphLaunch'));
  const bt = time(() => {
    f.rec(E0, S);
    for (let i = 0; i < 20; i++) f.cpy(dst, src, n, kind, S);
    f.rec(E1, S);
  }, 20);
  ck(f.ssync(S), 'sync');
  const t0 = performance.now();
  for (let i = 0; i < 200; i++) {
    e0.record(s);
    prepared.run();
    e1.record(s);
  }
  const host = ((performance.now() - t0) * 1000) / 200;
  ck(f.ssync(S), 'sync');
  const gbps = (us) => ((name === 'D2D' ? 2 : 1) * n) / us / 1e3;
  console.log(
    `${name}\t${n}\t${raw.toFixed(2)}\t${gm.toFixed(2)}\t${gmWarm.toFixed(2)}\t${wv.toFixed(2)}\t${gr.toFixed(2)}\t${bt.toFixed(2)}\t${host.toFixed(2)}\t(${[raw, gm, gmWarm, wv, gr, bt].map((x) => gbps(x).toFixed(1)).join(' / ')})`,
  );
}
rt[Symbol.dispose]();
