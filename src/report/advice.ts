/**
 * The strategy advice of `gpumem report`: for training, inference and data preprocessing, which memory kind to use
 * for what on this machine. Every recommendation is derived from a measured figure and carries it as evidence, with
 * the run it came from and how that kind of row compared with native CUDA C (./fidelity.ts). A rule whose figures
 * were not measured, or whose row's kind differed from native C in the published comparison, gives no advice; the
 * rows left out that way are listed.
 */
import type { DeviceInfo } from '../backend/backend.js';
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { nativeVerdict, type NativeVerdict } from './fidelity.js';
import { transferProgramAdvice } from './transfer-advice.js';

export type Workload = 'training' | 'inference' | 'preprocessing';

export interface Evidence {
  label: string;
  value: number;
  unit: 'GB/s' | 'µs' | '%' | 'x';
  /** Where the figure came from in the bench results. */
  source?: string;
  /** The run that measured it: this machine's bench, when, which device. */
  run?: string;
  /** How that kind of row compared with native CUDA C in the published comparison. */
  native?: string;
  nativeState?: 'agrees' | 'differs' | 'not compared';
}

/** A row a rule needed but did not quote: its kind differed from native C in the published comparison. */
export interface Withheld {
  source: string;
  reason: string;
}

export interface Advice {
  id: string;
  workloads: Workload[];
  title: string;
  recommendation: string;
  evidence: Evidence[];
}

const f1 = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

const sourceOf = (r: BenchResult): string => `${r.test} ${r.direction} ${r.srcKind}->${r.dstKind} ${r.engine} ${formatBytes(r.bytes, 0)}`;

class Figures {
  readonly withheld: Withheld[] = [];
  private readonly verdicts = new Map<BenchResult, NativeVerdict>();

  constructor(
    private readonly rows: BenchResult[],
    readonly device: number,
    private readonly backend: string,
    private readonly run: string,
  ) {}

  /** How the row's kind compared with native C (looked up once per row). */
  private verdict(r: BenchResult): NativeVerdict {
    let v = this.verdicts.get(r);
    if (!v) this.verdicts.set(r, (v = nativeVerdict(r, this.backend)));
    return v;
  }

  /** The row itself when its kind may be quoted; undefined (and listed as withheld) when it differed from native C. */
  private quotable(r: BenchResult | undefined): BenchResult | undefined {
    if (!r) return undefined;
    const v = this.verdict(r);
    if (v.state !== 'differs') return r;
    const source = sourceOf(r);
    if (!this.withheld.some((w) => w.source === source)) this.withheld.push({ source, reason: v.detail });
    return undefined;
  }

  /** Evidence from a row: its figure, where it came from, the run, and how its kind compared with native C. */
  ev(label: string, r: BenchResult | undefined, unit: 'GB/s' | 'µs' = 'GB/s'): Evidence | undefined {
    if (!r) return undefined;
    const value = unit === 'GB/s' ? r.medianGBps : r.medianUs;
    if (value === undefined) return undefined;
    const v = this.verdict(r);
    return { label, value, unit, source: sourceOf(r), run: this.run, native: v.detail, nativeState: v.state };
  }

  /** The row at the largest size matching the filter (or at `bytes`), if its kind may be quoted. */
  pick(test: string, direction: string, srcKind?: string, dstKind?: string, engine?: string, bytes?: number): BenchResult | undefined {
    return this.quotable(this.largest(test, direction, srcKind, dstKind, engine, bytes));
  }

  private largest(test: string, direction: string, srcKind?: string, dstKind?: string, engine?: string, bytes?: number): BenchResult | undefined {
    const m = this.rows.filter(
      (r) =>
        r.device === this.device &&
        r.test === test &&
        r.direction === direction &&
        (srcKind === undefined || r.srcKind === srcKind) &&
        (dstKind === undefined || r.dstKind === dstKind) &&
        (engine === undefined || r.engine === engine) &&
        (bytes === undefined || r.bytes === bytes),
    );
    return m.sort((a, b) => b.bytes - a.bytes)[0];
  }

  smallest(test: string, direction: string, srcKind: string, dstKind: string): BenchResult | undefined {
    return this.quotable(this.smallestRow(test, direction, srcKind, dstKind));
  }

  private smallestRow(test: string, direction: string, srcKind: string, dstKind: string): BenchResult | undefined {
    return this.rows
      .filter(
        (r) =>
          r.device === this.device &&
          r.test === test &&
          r.direction === direction &&
          r.srcKind === srcKind &&
          r.dstKind === dstKind &&
          r.engine === 'copy-engine',
      )
      .sort((a, b) => a.bytes - b.bytes)[0];
  }
}

/** Where the batch call comes from, for the advice's wording. */
function rt(bench: BenchReport): string {
  return bench.environment.backend === 'cuda'
    ? ' (cudaMemcpyBatchAsync where the runtime has it, from CUDA 12.8)'
    : bench.environment.backend === 'hip'
      ? ' (hipMemcpyBatchAsync from ROCm 7.1)'
      : '';
}

/** Derives the advice for one device from its info and bench rows. */
export function adviseDevice(info: DeviceInfo, bench: BenchReport): Advice[] {
  return adviseDeviceWithheld(info, bench).items;
}

/** The advice for one device, and the rows its rules left out because their kind differed from native C. */
export function adviseDeviceWithheld(info: DeviceInfo, bench: BenchReport): { items: Advice[]; withheld: Withheld[] } {
  const env = bench.environment;
  const name = env.devices.find((d) => d.index === info.index)?.name ?? info.name;
  const F = new Figures(
    bench.results,
    info.index,
    env.backend,
    `gpumem bench (${env.mode}) on this machine, ${env.date}, device ${info.index}${name ? ` (${name})` : ''}`,
  );
  const ev = (label: string, r: BenchResult | undefined, unit: 'GB/s' | 'µs' = 'GB/s'): Evidence | undefined => F.ev(label, r, unit);
  const out: Advice[] = [];
  const add = (a: Omit<Advice, 'evidence'> & { evidence: Array<Evidence | undefined> }): void => {
    const evidence = a.evidence.filter((e): e is Evidence => !!e);
    out.push({ ...a, evidence });
  };

  const h2dPinned = F.pick('copy', 'HtoD', 'pinned', 'device', 'copy-engine');
  const h2dPageable = F.pick('copy', 'HtoD', 'pageable', 'device', 'copy-engine');
  const d2hPinned = F.pick('copy', 'DtoH', 'device', 'pinned', 'copy-engine');
  const d2hPageable = F.pick('copy', 'DtoH', 'device', 'pageable', 'copy-engine');
  if (h2dPinned?.medianGBps && h2dPageable?.medianGBps) {
    const x = h2dPinned.medianGBps / h2dPageable.medianGBps;
    add({
      id: 'pin-staging-buffers',
      workloads: ['training', 'inference', 'preprocessing'],
      title: x >= 1.3 ? `Pin staging buffers: uploads from pinned memory are ${f1(x)}x faster here` : 'Pinned and pageable uploads are close here',
      recommendation:
        x >= 1.3
          ? `Stage host-to-device data in pinned memory (allocPinned / cudaHostAlloc / hipHostMalloc; DataLoader(pin_memory=True)); allocate the buffers once and reuse them. Pinned ${f1(h2dPinned.medianGBps)} GB/s against pageable ${f1(h2dPageable.medianGBps)} GB/s.`
          : `Pinned ${f1(h2dPinned.medianGBps)} GB/s against pageable ${f1(h2dPageable.medianGBps)} GB/s: pinning mostly buys asynchrony (copies that overlap compute), not bandwidth, on this machine.`,
      evidence: [ev('HtoD pinned', h2dPinned), ev('HtoD pageable', h2dPageable), { label: 'ratio', value: Math.round(x * 100) / 100, unit: 'x' }],
    });
  }
  if (d2hPinned?.medianGBps && d2hPageable?.medianGBps) {
    const x = d2hPinned.medianGBps / d2hPageable.medianGBps;
    const sync =
      'Copy outputs and logits into a reused pinned buffer with non_blocking copies and synchronize once (an event), not per tensor: .item() or .cpu() every step stalls the device.';
    add({
      id: 'pinned-readback',
      workloads: ['inference', 'training'],
      title:
        x >= 1.1 ? `Read results back into pinned memory (${f1(x)}x faster than pageable)` : 'Read-back bandwidth is close for pinned and pageable memory here',
      recommendation:
        x >= 1.1
          ? `A device-to-host copy into pageable memory is synchronous and goes through a bounce buffer: ${f1(d2hPageable.medianGBps)} GB/s against ${f1(d2hPinned.medianGBps)} GB/s into pinned memory. ${sync}`
          : `Into pageable memory ${f1(d2hPageable.medianGBps)} GB/s, into pinned ${f1(d2hPinned.medianGBps)} GB/s; a pageable read-back still blocks the host until it is done. ${sync}`,
      evidence: [ev('DtoH pinned', d2hPinned), ev('DtoH pageable', d2hPageable)],
    });
  }
  const bidir = F.pick('copy', 'bidirectional', 'pinned', 'device', 'copy-engine');
  if (bidir?.medianGBps && h2dPinned?.medianGBps) {
    const gain = bidir.medianGBps / h2dPinned.medianGBps;
    add({
      id: 'overlap-directions',
      workloads: ['training', 'preprocessing'],
      title: gain >= 1.5 ? `Upload and download at once: ${f1(gain)}x the one-way rate` : 'Uploads and downloads share the link here',
      recommendation:
        gain >= 1.5
          ? `With ${info.asyncEngines ?? 'several'} copy engines, copies in opposite directions on separate streams run together (${f1(bidir.medianGBps)} GB/s both ways against ${f1(h2dPinned.medianGBps)} GB/s one way): put the next batch's upload and the last batch's download on two streams.`
          : `Both directions at once reached ${f1(bidir.medianGBps)} GB/s against ${f1(h2dPinned.medianGBps)} GB/s one way: schedule uploads and downloads apart rather than expecting them to overlap.`,
      evidence: [ev('bidirectional pinned (both counted)', bidir), ev('HtoD pinned', h2dPinned)],
    });
  }
  const wc = F.pick('copy', 'HtoD', 'pinned-wc', 'device', 'copy-engine');
  if (wc?.medianGBps && h2dPinned?.medianGBps) {
    const x = wc.medianGBps / h2dPinned.medianGBps;
    add({
      id: 'write-combined',
      workloads: ['inference', 'preprocessing'],
      title: x > 1.05 ? 'Write-combined pinned memory uploads faster here' : 'Write-combined memory gives no upload gain here',
      recommendation:
        x > 1.05
          ? `Upload-only staging buffers that the CPU writes once and never reads can be write-combined (${f1(wc.medianGBps)} against ${f1(h2dPinned.medianGBps)} GB/s).`
          : `Write-combined ${f1(wc.medianGBps)} GB/s against plain pinned ${f1(h2dPinned.medianGBps)} GB/s: keep plain pinned memory, which the CPU can also read at full speed.`,
      evidence: [ev('HtoD write-combined', wc), ev('HtoD pinned', h2dPinned)],
    });
  }
  const small = F.smallest('copy', 'HtoD', 'pinned', 'device');
  if (small?.medianGBps && h2dPinned?.medianGBps && small.bytes < h2dPinned.bytes) {
    const frac = small.medianGBps / h2dPinned.medianGBps;
    add({
      id: 'batch-small-copies',
      workloads: ['preprocessing', 'inference', 'training'],
      title: `Batch small copies: ${formatBytes(small.bytes, 0)} copies reach ${Math.round(frac * 100)}% of the large-copy rate`,
      recommendation: `Each copy has a fixed cost: ${formatBytes(small.bytes, 0)} copies moved ${f1(small.medianGBps)} GB/s against ${f1(h2dPinned.medianGBps)} GB/s at ${formatBytes(h2dPinned.bytes, 0)}. Pack small tensors (labels, masks, scalars) into one pinned buffer and copy it once.`,
      evidence: [ev(`HtoD pinned ${formatBytes(small.bytes, 0)}`, small), ev(`HtoD pinned ${formatBytes(h2dPinned.bytes, 0)}`, h2dPinned)],
    });
  }
  // The transfer engine against the plain ways (gpumem bench --only transfer).
  const pick = (direction: string, src: string, dst: string, engine: (e: string) => boolean): BenchResult | undefined =>
    bench.results
      .filter(
        (r) => r.device === info.index && r.test === 'transfer' && r.direction === direction && r.srcKind === src && r.dstKind === dst && engine(r.engine),
      )
      .sort((a, b) => b.bytes - a.bytes)[0];
  const upDirect = pick('HtoD', 'pageable', 'device', (e) => e === 'runtime-direct');
  const upStaged = pick('HtoD', 'pageable', 'device', (e) => e.startsWith('gpumem-upload'));
  const downDirect = pick('DtoH', 'device', 'pageable', (e) => e === 'runtime-direct');
  const downStaged = pick('DtoH', 'device', 'pageable', (e) => e.startsWith('gpumem-download'));
  if (upDirect?.medianGBps && upStaged?.medianGBps) {
    const x = upStaged.medianGBps / upDirect.medianGBps;
    const down = downDirect?.medianGBps && downStaged?.medianGBps ? downStaged.medianGBps / downDirect.medianGBps : undefined;
    add({
      id: 'stage-pageable-transfers',
      workloads: ['training', 'inference', 'preprocessing'],
      title:
        x >= 1.2
          ? `rt.upload: ${f1(x)}x the direct pageable copy here (${f1(upStaged.medianGBps)} against ${f1(upDirect.medianGBps)} GB/s)`
          : `Staged and direct pageable uploads are close here (${f1(upStaged.medianGBps)} against ${f1(upDirect.medianGBps)} GB/s)`,
      recommendation:
        x >= 1.2
          ? `Move ordinary JS buffers with rt.upload / rt.download: they go through pinned chunks filled by ${upStaged.threads ?? 'several'} threads while the copy engine moves the previous chunk, ${f1(upStaged.medianGBps)} GB/s against ${f1(upDirect.medianGBps)} GB/s for the runtime's own pageable copy${down ? `; downloads ${f1(downStaged!.medianGBps!)} against ${f1(downDirect!.medianGBps!)} GB/s` : ''}. Buffers reused for many transfers can be pinned once instead (allocPinned, or allocPageable with register: true).`
          : `rt.upload moved ${f1(upStaged.medianGBps)} GB/s and the runtime's pageable copy ${f1(upDirect.medianGBps)} GB/s: on this machine the host copies limit both; pin the buffers you reuse.`,
      evidence: [
        ev('HtoD pageable, rt.upload', upStaged),
        ev('HtoD pageable, runtime copy', upDirect),
        ev('DtoH pageable, rt.download', downStaged),
        ev('DtoH pageable, runtime copy', downDirect),
      ],
    });
  }
  const oneByOne = pick('HtoD-small', 'pinned', 'device', (e) => e === 'one-by-one');
  const batched = pick('HtoD-small', 'pinned', 'device', (e) => e === 'copyBatch');
  const graphed = pick('HtoD-small', 'pinned', 'device', (e) => e === 'graph');
  if (oneByOne?.medianGBps && batched?.medianGBps) {
    const x = batched.medianGBps / oneByOne.medianGBps;
    add({
      id: 'batch-copies-call',
      workloads: ['preprocessing', 'inference', 'training'],
      title: x >= 1.2 ? `rt.copyBatch: ${f1(x)}x copies enqueued one by one` : 'One batch call and one call per copy are close here',
      recommendation: `${oneByOne.copies ?? 'Many'} copies of ${formatBytes(oneByOne.bytes / (oneByOne.copies ?? 1), 0)} from pinned memory moved ${f1(batched.medianGBps)} GB/s as one copyBatch${graphed?.medianGBps ? `, ${f1(graphed.medianGBps)} GB/s as one captured graph` : ''} and ${f1(oneByOne.medianGBps)} GB/s one by one. When small tensors cannot be packed into one buffer, enqueue them with rt.copyBatch${rt(bench)}.`,
      evidence: [ev('small copies, copyBatch', batched), ev('small copies, graph', graphed), ev('small copies, one by one', oneByOne)],
    });
  }
  const chainOne = pick('chain-100', 'device', 'device', (e) => e === 'one-by-one');
  const chainGraph = pick('chain-100', 'device', 'device', (e) => e === 'graph');
  if (chainOne?.medianUs && chainGraph?.medianUs) {
    add({
      id: 'capture-chains',
      workloads: ['inference', 'training'],
      title: `A captured chain costs ${f1(chainGraph.medianUs)} µs per operation against ${f1(chainOne.medianUs)} µs one by one`,
      recommendation: `A fixed sequence of small operations repeated every step (a decode step's copies and kernels) costs ${f1(chainOne.medianUs)} µs per operation when enqueued one by one and ${f1(chainGraph.medianUs)} µs when captured once with rt.capture and launched as one graph.`,
      evidence: [ev('chain of 100, per operation, graph', chainGraph, 'µs'), ev('chain of 100, per operation, one by one', chainOne, 'µs')],
    });
  }
  const first = F.pick('managed', 'first-touch-by-kernel');
  // the kernels after the first (the pages mapped), else the first; benches before 2026-12 have one row for both
  const afterPf = F.pick('managed', 'kernels-after-prefetch') ?? F.pick('managed', 'first-kernel-after-prefetch');
  const firstAfterPf = F.pick('managed', 'first-kernel-after-prefetch');
  const pf = F.pick('managed', 'prefetch-to-device');
  if (first?.medianGBps && afterPf?.medianGBps) {
    const conc = info.concurrentManagedAccess;
    const gain = afterPf.medianGBps / first.medianGBps;
    add({
      id: 'prefetch-managed',
      workloads: ['training', 'inference'],
      title:
        gain >= 1.5
          ? `Prefetch managed memory before kernels use it: ${f1(gain)}x faster than page faults (first touch ${f1(first.medianGBps)} GB/s)`
          : `Managed memory faults in about as fast as it is prefetched here (${f1(first.medianGBps)} against ${f1(afterPf.medianGBps)} GB/s)`,
      recommendation: `A kernel touching managed pages that live on the host migrates them on demand at ${f1(first.medianGBps)} GB/s; after an explicit prefetch${pf?.medianGBps ? ` (${f1(pf.medianGBps)} GB/s)` : ''} the same kernel reads ${f1(afterPf.medianGBps)} GB/s${firstAfterPf?.medianGBps && firstAfterPf !== afterPf ? ` (the first kernel after the prefetch, which still maps the pages, ${f1(firstAfterPf.medianGBps)} GB/s)` : ''}. ${
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
  const cache = bench.results.filter((r) => r.device === info.index && r.test === 'cache' && r.medianGBps !== undefined).sort((a, b) => a.bytes - b.bytes);
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
  const peerOn = bench.results.find((r) => r.device === info.index && r.test === 'peer' && r.direction === 'one-way' && r.peerAccess === true);
  const peerOff =
    peerOn &&
    bench.results.find((r) => r.device === info.index && r.test === 'peer' && r.direction === 'one-way' && r.peerAccess === false && r.peer === peerOn.peer);
  if (peerOn?.medianGBps && peerOff?.medianGBps) {
    add({
      id: 'peer-access',
      workloads: ['training', 'inference'],
      title: `Enable peer access between GPUs (${f1(peerOn.medianGBps)} against ${f1(peerOff.medianGBps)} GB/s)`,
      recommendation: `Device ${info.index} to ${peerOn.peer} moved ${f1(peerOn.medianGBps)} GB/s with peer access and ${f1(peerOff.medianGBps)} GB/s without: tensor- and pipeline-parallel traffic should run with peer access on (NCCL does this itself).`,
      evidence: [ev('peer one-way, access on', peerOn), ev('peer one-way, access off', peerOff)],
    });
  }
  const collective = collectiveAdvice(
    bench.results.filter((r) => r.device === info.index && r.test === 'collective' && r.direction === 'all-reduce'),
    F,
  );
  if (collective) add(collective);
  if (info.link && ((info.link.generation ?? 0) < (info.link.maxGeneration ?? 0) || (info.link.width ?? 0) < (info.link.maxWidth ?? 0))) {
    add({
      id: 'link-below-max',
      workloads: ['training', 'inference', 'preprocessing'],
      title: `The PCIe link runs at gen ${info.link.generation} x${info.link.width}, below its gen ${info.link.maxGeneration} x${info.link.maxWidth}`,
      recommendation:
        'Host transfers are capped by the trained link: check the slot, riser and BIOS settings; links also drop speed when idle (read again under load).',
      evidence: [ev('HtoD pinned', h2dPinned)],
    });
  }
  for (const a of transferProgramAdvice(info.index, { rows: bench.results, pick: (...k) => F.pick(...k), ev: (label, r) => ev(label, r) })) add(a);
  return { items: out, withheld: F.withheld };
}

/**
 * Which buffers all-reduce should run on, from the largest size measured with device buffers and at least one other
 * choice (registered ncclMemAlloc buffers, staging through pinned host memory); bus bandwidth as nccl-tests counts it.
 */
function collectiveAdvice(rows: BenchResult[], F: Figures): (Omit<Advice, 'evidence'> & { evidence: Array<Evidence | undefined> }) | undefined {
  const at = (kind: string, bytes: number): BenchResult | undefined => rows.find((r) => r.srcKind === kind && r.bytes === bytes && r.medianBusGBps);
  const sizes = rows
    .filter((r) => r.srcKind === 'device' && r.medianBusGBps)
    .map((r) => r.bytes)
    .filter((b) => at('nccl-registered', b) || at('pinned', b))
    .sort((a, b) => b - a);
  const bytes = sizes[0];
  if (bytes === undefined) return undefined;
  const device = at('device', bytes)!;
  const registered = at('nccl-registered', bytes);
  const pinned = at('pinned', bytes);
  const bus = (label: string, r: BenchResult | undefined): Evidence | undefined => {
    const e = F.ev(label, r);
    return (
      e &&
      r && {
        ...e,
        value: r.medianBusGBps!,
        source: `collective all-reduce ${r.srcKind} ${r.engine} ${formatBytes(r.bytes, 0)} ${r.ranks} ranks, bus bandwidth`,
      }
    );
  };
  const size = formatBytes(bytes, 0);
  const parts: string[] = [];
  if (pinned)
    parts.push(
      `All-reduce of ${size} over ${device.ranks} GPUs: ${f1(device.medianBusGBps!)} GB/s bus bandwidth through ${device.engine} on device buffers, ${f1(pinned.medianBusGBps!)} GB/s staged through pinned host memory; keep the tensors a job communicates on the GPU.`,
    );
  if (registered) {
    const gain = registered.medianBusGBps! / device.medianBusGBps!;
    parts.push(
      gain >= 1.05
        ? `Buffers from ncclMemAlloc registered with the communicator (NCCL's user-buffer registration) reached ${f1(registered.medianBusGBps!)} GB/s against ${f1(device.medianBusGBps!)} GB/s on ordinary device buffers: allocate the buffers gradients are reduced in that way.`
        : `Registered ncclMemAlloc buffers gave ${f1(registered.medianBusGBps!)} GB/s against ${f1(device.medianBusGBps!)} GB/s on ordinary device buffers: no gain worth their setup on this machine.`,
    );
  }
  return {
    id: 'collective-buffers',
    workloads: ['training'],
    title:
      registered && registered.medianBusGBps! >= 1.05 * device.medianBusGBps! ? 'Register the buffers collectives run on' : 'Run collectives on device buffers',
    recommendation: parts.join(' '),
    evidence: [
      bus('all-reduce, device buffers', device),
      bus('all-reduce, registered buffers', registered),
      bus('all-reduce, staged through pinned memory', pinned),
    ],
  };
}
