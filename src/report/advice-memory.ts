/** Advice on the device's memory: managed memory, zero-copy, the bandwidth roofline, L2 reuse, allocation costs. */
import { formatBytes } from '../units.js';
import { f1, type RuleContext } from './figures.js';

/** Managed memory (XNACK on AMD), zero-copy scope, the roofline, L2 reuse, pools, pinned allocation cost. */
export function memoryAdvice(c: RuleContext): void {
  const { info, F, add } = c;
  const ev = F.ev.bind(F);
  const first = F.pick('managed', 'first-touch-by-kernel');
  // the kernels after the first (the pages mapped), else the first; benches before 2026-12 have one row for both
  const afterPf = F.pick('managed', 'kernels-after-prefetch') ?? F.pick('managed', 'first-kernel-after-prefetch');
  const firstAfterPf = F.pick('managed', 'first-kernel-after-prefetch');
  const pf = F.pick('managed', 'prefetch-to-device');
  if (first?.medianGBps && afterPf?.medianGBps) {
    const conc = info.concurrentManagedAccess;
    // AMD: without XNACK a kernel's access to a managed page on the host does not fault it over; the page is read
    // where it lies until something migrates it (concurrentManagedAccess only says the kernel driver has HMM).
    const xnackOff = info.xnack?.enabled === false;
    const gain = afterPf.medianGBps / first.medianGBps;
    add({
      id: 'prefetch-managed',
      workloads: ['training', 'inference'],
      title: xnackOff
        ? `XNACK is off: managed memory is not migrated when kernels touch it; prefetch it (${f1(first.medianGBps)} GB/s untouched, ${f1(afterPf.medianGBps)} GB/s after a prefetch)`
        : gain >= 1.5
          ? `Prefetch managed memory before kernels use it: ${f1(gain)}x faster than page faults (first touch ${f1(first.medianGBps)} GB/s)`
          : `Managed memory faults in about as fast as it is prefetched here (${f1(first.medianGBps)} against ${f1(afterPf.medianGBps)} GB/s)`,
      recommendation: xnackOff
        ? `XNACK is off on this device (${info.xnack?.source === 'runtime' ? 'the runtime reports no pageable memory access' : 'its target ID says xnack-'}${info.xnack?.env !== undefined ? `, HSA_XNACK=${info.xnack.env}` : ''}): a kernel reading managed pages that live on the host reads them over the link at ${f1(first.medianGBps)} GB/s instead of migrating them, and host memory malloc'd outside HIP is not reachable at all. Prefetch managed memory to the device on the kernel's stream before the kernel (${f1(afterPf.medianGBps)} GB/s after it), or run with HSA_XNACK=1 on a GPU whose target supports XNACK (gfx90a, gfx942) to have pages migrate on access.`
        : `A kernel touching managed pages that live on the host migrates them on demand at ${f1(first.medianGBps)} GB/s; after an explicit prefetch${pf?.medianGBps ? ` (${f1(pf.medianGBps)} GB/s)` : ''} the same kernel reads ${f1(afterPf.medianGBps)} GB/s${firstAfterPf?.medianGBps && firstAfterPf !== afterPf ? ` (the first kernel after the prefetch, which still maps the pages, ${f1(firstAfterPf.medianGBps)} GB/s)` : ''}. ${
            conc === false
              ? 'This device has no concurrent managed access: the host must not touch managed memory while kernels run, and every first touch faults.'
              : 'Prefetch (prefetch(device, stream)) ahead of the kernel on the same stream, and set preferred-location for data that stays on the device.'
          }`,
      evidence: [
        ev('managed first touch', first),
        ev('managed kernels after prefetch', afterPf),
        ev('managed first kernel after prefetch', firstAfterPf),
        ev('prefetch', pf),
      ],
    });
  }
  const zc = F.pick('zero-copy', 'kernel-read');
  const ro = F.pick('stream', 'read-only');
  if (zc?.medianGBps && ro?.medianGBps) {
    add({
      id: 'zero-copy-scope',
      workloads: ['inference', 'preprocessing'],
      title: `Zero-copy reads cross the link at ${f1(zc.medianGBps)} GB/s`,
      recommendation: `Kernels read mapped host memory at ${f1(zc.medianGBps)} GB/s against ${f1(ro.medianGBps)} GB/s from device memory: use zero-copy for data read once or sparsely (flags, small lookup inputs, results polled by the host), copy anything read twice.`,
      evidence: [ev('kernel read of mapped memory', zc), ev('kernel read of device memory', ro)],
    });
  }
  const triad = F.pick('stream', 'triad');
  const d2d = F.pick('copy', 'DtoD', 'device', 'device', 'copy-engine');
  if (triad?.medianGBps) {
    add({
      id: 'memory-roofline',
      workloads: ['inference', 'training'],
      title: `Memory-bound kernels top out near ${f1(triad.medianGBps)} GB/s here`,
      recommendation: `STREAM triad reached ${f1(triad.medianGBps)} GB/s${triad.percentOfPeak !== undefined ? ` (${triad.percentOfPeak}% of the theoretical)` : ''}${d2d?.medianGBps ? ` and a device copy ${f1(d2d.medianGBps)} GB/s (read+write)` : ''}. Use it as the ceiling for memory-bound work: LLM decode reads every weight and the KV cache per token, so tokens/s per sequence batch cannot exceed ${f1(triad.medianGBps)} GB/s divided by the bytes read per step (gpumem plan gives those bytes).`,
      evidence: [ev('STREAM triad', triad), ev('DtoD copy', d2d)],
    });
  }
  const cache = F.quotableRows((r) => r.test === 'cache' && r.medianGBps !== undefined).sort((a, b) => a.bytes - b.bytes);
  if (cache.length > 2 && info.l2Bytes) {
    const inL2 = cache.filter((r) => r.bytes <= info.l2Bytes! / 2);
    const beyond = cache.filter((r) => r.bytes >= info.l2Bytes! * 4);
    const l2r = inL2[inL2.length - 1];
    const hbm = beyond[beyond.length - 1];
    if (l2r?.medianGBps && hbm?.medianGBps) {
      add({
        id: 'reuse-in-l2',
        workloads: ['training', 'inference'],
        title: `Working sets under the ${formatBytes(info.l2Bytes, 0)} L2 read ${f1(l2r.medianGBps / hbm.medianGBps)}x faster`,
        recommendation: `Reads of a ${formatBytes(l2r.bytes, 0)} working set ran at ${f1(l2r.medianGBps)} GB/s against ${f1(hbm.medianGBps)} GB/s at ${formatBytes(hbm.bytes, 0)}: fuse kernels and tile so that data is reused while it is in L2 (flash attention does this for attention).`,
        evidence: [ev(`read ${formatBytes(l2r.bytes, 0)}`, l2r), ev(`read ${formatBytes(hbm.bytes, 0)}`, hbm)],
      });
    }
  }
  const mallocRow =
    F.pick('alloc', 'allocate+free', 'device', 'device', 'driver', 64 * 1024 * 1024) ?? F.pick('alloc', 'allocate+free', 'device', 'device', 'driver');
  const poolRow = F.pick('alloc', 'allocate+free', 'device', 'device', 'gpumem-pool', mallocRow?.bytes);
  const asyncRow = F.pick('alloc', 'allocate+free', 'device', 'device', 'stream-ordered', mallocRow?.bytes);
  if (mallocRow?.medianUs && poolRow?.medianUs) {
    add({
      id: 'pool-allocations',
      workloads: ['training', 'inference', 'preprocessing'],
      title: `Pool device allocations: malloc+free costs ${f1(mallocRow.medianUs)} µs, a pool hit ${f1(poolRow.medianUs)} µs`,
      recommendation: `Do not allocate and free device memory in the steady state: keep a caching pool (gpumem CachingPool, PyTorch's caching allocator${asyncRow?.medianUs ? `, or the runtime's stream-ordered pool at ${f1(asyncRow.medianUs)} µs` : ''}). ${formatBytes(mallocRow.bytes, 0)} allocate+free through the driver took ${f1(mallocRow.medianUs)} µs and synchronizes the device.`,
      evidence: [ev('device malloc+free', mallocRow, 'µs'), ev('gpumem pool hit', poolRow, 'µs'), ev('stream-ordered malloc+free', asyncRow, 'µs')],
    });
  }
  const pinnedAlloc =
    F.pick('alloc', 'allocate+free', 'pinned', 'pinned', 'driver', 64 * 1024 * 1024) ?? F.pick('alloc', 'allocate+free', 'pinned', 'pinned', 'driver');
  if (pinnedAlloc?.medianUs) {
    add({
      id: 'pinned-allocation-cost',
      workloads: ['preprocessing', 'training'],
      title: `Pinned allocation costs ${f1(pinnedAlloc.medianUs / 1000)} ms per ${formatBytes(pinnedAlloc.bytes, 0)}`,
      recommendation: `Page-locking is slow (${f1(pinnedAlloc.medianUs)} µs to allocate and free ${formatBytes(pinnedAlloc.bytes, 0)}): allocate pinned staging buffers at start-up and recycle them (a CachingPool over a PinnedResource), never per batch.`,
      evidence: [ev('pinned allocate+free', pinnedAlloc, 'µs')],
    });
  }
}
