/** Advice from the plain copies: pinned against pageable, read-back, both directions, write-combining, small copies. */
import { formatBytes } from '../units.js';
import { f1, type RuleContext } from './figures.js';

/** Pinned staging, pinned read-back, overlapping directions, write-combined memory, small copies. */
export function copyAdvice(c: RuleContext): void {
  const { info, F, add } = c;
  const ev = F.ev.bind(F);
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
}
