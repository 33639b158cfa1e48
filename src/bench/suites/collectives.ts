/**
 * Collectives across the selected devices: all-reduce, all-gather, reduce-scatter, broadcast, all-to-all and
 * send-recv, from 8 bytes up, with the buffers a job can choose: ordinary device buffers through NCCL / RCCL, the
 * same buffers registered with the communicator (ncclCommRegister), and staged through pinned host memory. On the
 * host backend the collectives run on the CPU across its logical devices (staged through pageable memory, the real
 * implementation there). Timed as nccl-tests times: per repeat, a run of calls back to back (20 from 64 MiB, 100
 * below; one for staged calls, which finish before they return) and one wait for all ranks, divided by the calls;
 * counted as nccl-tests counts it (algorithm bandwidth = size / time; bus bandwidth = algorithm bandwidth x its
 * factor), and verified against the expected result.
 */
import type { Allocation } from '../../memory/allocation.js';
import type { Runtime } from '../../runtime/runtime.js';
import { NcclCommunicator } from '../../collectives/nccl.js';
import { StagedCommunicator, type Communicator } from '../../collectives/staged.js';
import { bufferBytes, COLLECTIVES, ncclTestsSize, type Collective, type CollectiveCall } from '../../collectives/types.js';
import { summarize } from '../stats.js';
import type { BenchContext } from '../context.js';

const MiB = 1024 * 1024;

/** The value element i of rank r's send buffer holds: small whole numbers, so float32 sums are exact. */
const value = (r: number, i: number): number => (r + 1) * 8 + (i % 13);

/** What element i of rank r's receive buffer must hold after `op` over n ranks with `count` elements. */
function expected(op: Collective, r: number, i: number, n: number, count: number): number {
  switch (op) {
    case 'all-reduce': {
      let s = 0;
      for (let k = 0; k < n; k++) s += value(k, i);
      return s;
    }
    case 'reduce-scatter': {
      let s = 0;
      for (let k = 0; k < n; k++) s += value(k, r * count + i);
      return s;
    }
    case 'all-gather':
      return value(Math.floor(i / count), i % count);
    case 'broadcast':
      return value(0, i);
    case 'all-to-all': {
      const from = Math.floor(i / count);
      return value(from, r * count + (i % count));
    }
    case 'send-recv':
      return value((r + n - 1) % n, i);
  }
}

/** Sizes from 8 bytes up to `max`, by factors of 8 (each the nccl-tests size of an all-reduce). */
function sizes(max: number): number[] {
  const out: number[] = [];
  for (let b = 8; b <= max; b *= 8) out.push(b);
  return out;
}

interface Variant {
  /**
   * Where the data is kept or staged: device buffers (NCCL, RCCL), ncclMemAlloc buffers registered with the
   * communicator, pinned or pageable host memory (staged).
   */
  name: 'device' | 'nccl-registered' | 'pinned' | 'pageable';
  comm: Communicator;
  /** One buffer per rank. */
  alloc(bytes: number): Allocation[];
}

/** Collective rows for every variant this backend offers; rows go to the first device's context. */
export async function collectiveTests(rt: Runtime, ctxs: BenchContext[], max: number): Promise<void> {
  if (ctxs.length < 2) return;
  const first = ctxs[0]!;
  const devices = ctxs.map((c) => c.dev.index);
  const n = devices.length;
  const quick = first.options.quick;
  const top = Math.min(max, quick ? 64 * MiB : 1024 * MiB);
  const plain = (bytes: number): Allocation[] => devices.map((d) => rt.device(d).alloc(bytes));
  const variants: Variant[] = [];
  if (rt.backend.name === 'host') variants.push({ name: 'pageable', comm: new StagedCommunicator(rt, devices, false), alloc: plain });
  else {
    try {
      const nccl = new NcclCommunicator(rt, devices);
      variants.push({ name: 'device', comm: nccl, alloc: plain });
      variants.push({ name: 'nccl-registered', comm: nccl, alloc: (bytes) => nccl.allocRegistered(bytes) });
    } catch (e) {
      first.failures.push({ test: 'collective', direction: 'all', bytes: 0, reason: `${(e as Error).message.split('\n')[0]}` });
    }
    variants.push({ name: 'pinned', comm: new StagedCommunicator(rt, devices, true), alloc: plain });
  }
  const refused = new Set<string>();
  try {
    for (const v of variants) {
      for (const op of COLLECTIVES) {
        for (const size of sizes(top)) {
          first.checkAbort();
          // the count whose nccl-tests size is `size`: all-gather, reduce-scatter and all-to-all sizes span every rank's part
          const spread = op === 'all-gather' || op === 'reduce-scatter' || op === 'all-to-all';
          const count = Math.max(1, Math.floor(size / 4 / (spread ? n : 1)));
          const call = (send: Allocation[], recv: Allocation[]): CollectiveCall => ({ op, send, recv, count, dtype: 'float32', reduction: 'sum', root: 0 });
          const need = bufferBytes(op, count, 'float32', n);
          if (need.send > max || need.recv > max) continue;
          first.progress(`collective ${op} ${size} bytes over ${n} ranks (${v.name})`);
          if (refused.has(v.name)) continue;
          let send: Allocation[] = [];
          let recv: Allocation[] = [];
          try {
            send = v.alloc(need.send);
            recv = v.alloc(need.recv);
          } catch (e) {
            // a library without registration (NCCL before 2.19) says so once, and the variant is left out
            for (const a of send) a.free();
            if (v.name !== 'nccl-registered') throw e;
            refused.add(v.name);
            first.failures.push({ test: 'collective', direction: 'all', bytes: 0, reason: `registered buffers: ${(e as Error).message.split('\n')[0]}` });
            continue;
          }
          try {
            // the send data: rank r holds value(r, i) at element i
            for (let r = 0; r < n; r++) {
              const host = new Float32Array(need.send / 4);
              for (let i = 0; i < host.length; i++) host[i] = value(r, i);
              using staged = rt.allocPageable(host.buffer);
              rt.copy(send[r]!, staged);
            }
            const reps = quick ? 3 : 5;
            const calls = v.comm.library === 'staged' ? 1 : size >= 64 * MiB ? 20 : 100;
            const c = call(send, recv);
            const runs = await first.timeHost(
              () => {
                for (let k = 0; k < calls; k++) v.comm.run(c);
                v.comm.synchronize();
              },
              reps,
              1,
            );
            const ms = runs.map((t) => t / calls);
            let ok = true;
            for (let r = 0; r < n && ok; r++) {
              using back = rt.allocPageable(need.recv);
              rt.copy(back, recv[r]!);
              const got = back.typed(Float32Array);
              const stride = Math.max(1, Math.floor(got.length / 65536));
              for (let i = 0; i < got.length && ok; i += stride) if (got[i] !== expected(op, r, i, n, count)) ok = false;
            }
            const { bytes, busFactor } = ncclTestsSize(op, count, 'float32', n);
            const row = first.addBandwidth(
              { test: 'collective', direction: op, srcKind: v.name, dstKind: v.name, engine: v.comm.library, bytes, ranks: n },
              ms,
              bytes,
              'algorithm',
              ok,
            );
            const bus = summarize(ms.map((t) => (bytes * busFactor) / (t * 1e-3) / 1e9));
            row.medianBusGBps = Math.round(bus.median * 1000) / 1000;
          } finally {
            for (const a of [...send, ...recv]) a.free();
          }
        }
      }
    }
  } finally {
    for (const comm of new Set(variants.map((v) => v.comm))) comm[Symbol.dispose]();
  }
}
