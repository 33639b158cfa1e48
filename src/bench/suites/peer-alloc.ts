/**
 * Peer copies between every pair of GPUs (one way and both ways, peer access on and off, through the copy engines
 * and, with peer access, a kernel reading across the link; the latency of a 4-byte copy), and the latency of
 * allocate + free for device, pinned and managed memory, the runtime's stream-ordered pool and gpumem's pool.
 */
import { CachingPool } from '../../pool/caching-pool.js';
import { DeviceResource } from '../../pool/sources.js';
import type { Runtime } from '../../runtime/runtime.js';
import { BenchContext } from '../context.js';

const MiB = 1024 * 1024;

/** Peer copies for every ordered pair of `devices`; rows are added to the first device's context. */
export async function peerTests(rt: Runtime, ctxs: BenchContext[], max: number): Promise<void> {
  if (ctxs.length < 2) return;
  const quick = ctxs[0]!.options.quick;
  const bytes = Math.min(max, quick ? 64 * MiB : 256 * MiB);
  const reps = quick ? 5 : 10;
  for (const src of ctxs) {
    for (const dst of ctxs) {
      if (src === dst) continue;
      const i = src.dev.index;
      const j = dst.dev.index;
      using a = src.dev.alloc(bytes);
      using b = dst.dev.alloc(bytes);
      using a2 = src.dev.alloc(bytes);
      using b2 = dst.dev.alloc(bytes);
      using sj = dst.dev.createStream({ nonBlocking: true });
      using start = src.dev.createEvent({ timing: false });
      using done = dst.dev.createEvent({ timing: false });
      const can = src.dev.canAccessPeer(dst.dev) && dst.dev.canAccessPeer(src.dev);
      for (const access of can ? [true, false] : [false]) {
        src.checkAbort();
        if (access) {
          src.dev.enablePeerAccess(dst.dev);
          dst.dev.enablePeerAccess(src.dev);
        } else if (can) {
          src.dev.disablePeerAccess(dst.dev);
          dst.dev.disablePeerAccess(src.dev);
        }
        src.progress(`peer ${i} -> ${j}, peer access ${access ? 'on' : 'off'}`);
        const seed = 1000 + i * 16 + j;
        await src.fillPattern(a, seed, bytes);
        await dst.fillPattern(b2, seed, bytes);
        rt.fill(b, 0);
        const oneWay = rt.prepareCopy(b, a, { stream: src.stream });
        const one = await src.timeDevice(() => oneWay.run(), reps);
        const ok1 = await dst.verifyPattern(b, seed, bytes);
        src.addBandwidth(
          { test: 'peer', direction: 'one-way', srcKind: 'device', dstKind: 'device', engine: 'copy-engine', bytes, peerAccess: access, peer: j },
          one,
          bytes,
          'one-way',
          ok1,
        );
        rt.fill(a2, 0);
        rt.fill(b, 0);
        const back = rt.prepareCopy(a2, b2, { stream: sj });
        const both = await src.timeDevice(() => {
          start.record(src.stream);
          sj.waitEvent(start);
          oneWay.run();
          back.run();
          done.record(sj);
          src.stream.waitEvent(done);
        }, reps);
        const ok2 = (await dst.verifyPattern(b, seed, bytes)) && (await src.verifyPattern(a2, seed, bytes));
        src.addBandwidth(
          { test: 'peer', direction: 'bidirectional', srcKind: 'device', dstKind: 'device', engine: 'copy-engine', bytes, peerAccess: access, peer: j },
          both,
          2 * bytes,
          'both-directions',
          ok2,
        );
        // the latency of the smallest copy: 4 bytes from i to j, one at a time
        const tiny = rt.prepareCopy(b, a, { stream: src.stream, bytes: 4 });
        const lat = await src.timeDevice(() => tiny.run(), quick ? 20 : 100);
        src.addLatency(
          { test: 'peer', direction: 'latency', srcKind: 'device', dstKind: 'device', engine: 'copy-engine', bytes: 4, peerAccess: access, peer: j },
          lat.map((ms) => ms * 1000),
          true,
        );
        // an SM copy: a kernel on the destination reads the source's memory across the link (needs peer access)
        if (access && dst.module && bytes % 16 === 0) {
          const v = bytes / 16;
          rt.fill(b, 0);
          const pull = dst.module.kernel('copy_v16').prepare({ grid: dst.grid(16, v, 512), block: 512, stream: dst.stream }, b, a, v);
          const sm = await dst.timeDevice(() => pull.launch(), reps);
          const ok3 = await dst.verifyPattern(b, seed, bytes);
          src.addBandwidth(
            { test: 'peer', direction: 'one-way', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes, peerAccess: access, peer: j },
            sm,
            bytes,
            'one-way',
            ok3,
          );
        }
      }
    }
  }
}

export async function allocTests(ctx: BenchContext): Promise<void> {
  const { dev, rt, stream } = ctx;
  const quick = ctx.options.quick;
  const us = (ms: number[], n: number): number[] => ms.map((t) => (t * 1000) / n);
  for (const bytes of [512, MiB, 64 * MiB]) {
    ctx.checkAbort();
    ctx.progress(`allocate + free latency, ${bytes} bytes`);
    const row = (srcKind: string, engine: string) => ({ test: 'alloc', direction: 'allocate+free', srcKind, dstKind: srcKind, engine, bytes });
    // The host backend allocates real, zeroed JS memory: fewer repeats keep it short.
    const scale = ctx.host ? 0.1 : 1;
    const n = Math.max(3, Math.round((quick ? 50 : 200) * scale));
    const dm = await ctx.timeHost(
      () => {
        for (let i = 0; i < n; i++) rt.backend.free(dev.index, rt.backend.malloc(dev.index, bytes));
      },
      quick ? 5 : 10,
    );
    const driverRow = ctx.addLatency(row('device', 'driver'), us(dm, n), true);
    if (!ctx.host && bytes < 2 * MiB) {
      // Measured on H200s (docs/performance.md, allocation): the same loop in a process with no other small allocation
      // cost about 20 times more; our reading is that the driver maps and unmaps the chunk holding small blocks.
      driverRow.note =
        'other small device allocations stay alive meanwhile (the bench holds some); a program whose only small allocation comes and goes pays far more per pair (the driver seemingly maps and unmaps a chunk each time)';
    }
    if (rt.backend.capabilities.streamOrderedAllocator) {
      const na = Math.max(10, Math.round((quick ? 2000 : 20000) * scale));
      const am = await ctx.timeHost(
        () => {
          for (let i = 0; i < na; i++) rt.backend.freeAsync(rt.backend.mallocAsync(dev.index, bytes, stream.handle), stream.handle);
        },
        quick ? 5 : 10,
      );
      await stream.synchronize();
      ctx.addLatency(row('device', 'stream-ordered'), us(am, na), true);
    }
    const np = Math.max(2, Math.round((quick ? 5 : 20) * scale));
    const pm = await ctx.timeHost(
      () => {
        for (let i = 0; i < np; i++) rt.backend.hostFree(rt.backend.hostAlloc(dev.index, bytes, { portable: true }));
      },
      quick ? 3 : 5,
    );
    ctx.addLatency(row('pinned', 'driver'), us(pm, np), true);
    if (rt.backend.capabilities.managedMemory) {
      const nm = Math.max(3, Math.round((quick ? 20 : 100) * scale));
      const mm = await ctx.timeHost(
        () => {
          for (let i = 0; i < nm; i++) rt.backend.free(dev.index, rt.backend.mallocManaged(dev.index, bytes, false));
        },
        quick ? 3 : 5,
      );
      ctx.addLatency(row('managed', 'driver'), us(mm, nm), true);
    }
    // gpumem's pool: a cache hit (after the first allocation filled the cache), allocate + deallocate from TypeScript.
    using pool = new CachingPool(new DeviceResource(dev));
    pool.deallocate(pool.allocate(bytes, { stream }), bytes, { stream });
    const nh = 100_000;
    const hm = await ctx.timeHost(
      () => {
        for (let i = 0; i < nh; i++) pool.deallocate(pool.allocate(bytes, { stream }), bytes, { stream });
      },
      quick ? 10 : 30,
    );
    ctx.addLatency(row('device', 'gpumem-pool'), us(hm, nh), pool.stats().cacheMisses === 1);
  }
  // The pool's free lists with many live blocks: a hit should cost the same at 1k, 10k and 100k (O(log n)).
  for (const live of [1_000, 10_000, 100_000]) {
    ctx.checkAbort();
    ctx.progress(`gpumem pool hit with ${live} live blocks`);
    using pool = new CachingPool(new DeviceResource(dev));
    const held: number[] = [];
    for (let i = 0; i < live; i++) held.push(pool.allocate(4096 + (i % 64) * 256, { stream }));
    for (let i = 0; i < live; i += 2) pool.deallocate(held[i]!, 4096 + (i % 64) * 256, { stream });
    const nh = 50_000;
    const hm = await ctx.timeHost(
      () => {
        for (let i = 0; i < nh; i++) pool.deallocate(pool.allocate(5000, { stream }), 5000, { stream });
      },
      quick ? 10 : 30,
    );
    ctx.addLatency(
      { test: 'alloc', direction: `allocate+free, ${live} live blocks`, srcKind: 'device', dstKind: 'device', engine: 'gpumem-pool', bytes: 5000 },
      us(hm, nh),
      true,
    );
  }
}

export { BenchContext };
