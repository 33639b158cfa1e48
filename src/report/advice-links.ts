/** Advice on the links between GPUs and to the host: peer access, the buffers collectives run on, a PCIe link below its maximum. */
import type { BenchResult } from '../formats/bench-schema.js';
import { formatBytes } from '../units.js';
import { f1, type AdviceDraft, type Evidence, type Figures, type RuleContext } from './figures.js';

/** Peer access, collective buffers, the PCIe link. */
export function linkAdvice(c: RuleContext): void {
  const { info, F, add } = c;
  const ev = F.ev.bind(F);
  const h2dPinned = F.pick('copy', 'HtoD', 'pinned', 'device', 'copy-engine');
  const peerOn = F.quotableRows((r) => r.test === 'peer' && r.direction === 'one-way' && r.peerAccess === true)[0];
  const peerOff = peerOn && F.quotableRows((r) => r.test === 'peer' && r.direction === 'one-way' && r.peerAccess === false && r.peer === peerOn.peer)[0];
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
    F.quotableRows((r) => r.test === 'collective' && r.direction === 'all-reduce'),
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
}

/**
 * Which buffers all-reduce should run on, from the largest size measured with device buffers and at least one other
 * choice (registered ncclMemAlloc buffers, staging through pinned host memory); bus bandwidth as nccl-tests counts it.
 */
function collectiveAdvice(rows: BenchResult[], F: Figures): AdviceDraft | undefined {
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
