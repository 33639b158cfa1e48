/** `gpumem pool replay TRACE`: text rendering of a replay report. */
import type { ReplayReport } from '../replay/replay.js';
import { formatBytes } from '../units.js';
import { table } from './text.js';

export function renderReplay(r: ReplayReport): string {
  const t = r.trace;
  const out: string[] = [];
  out.push(
    `trace: ${t.file} (${t.format}, device ${t.device}, ${t.events} events, ${t.allocations} allocations on ${t.streams} stream${t.streams === 1 ? '' : 's'})`,
  );
  const rec = [`peak requested ${formatBytes(t.peakRequestedBytes, 2)}`];
  if (t.peakReservedBytes !== undefined)
    rec.push(
      `peak reserved ${formatBytes(t.peakReservedBytes, 2)}`,
      t.segmentMaps ? `${t.segmentAllocs} segment allocations and ${t.segmentMaps} maps of expandable segments` : `${t.segmentAllocs} segment allocations`,
    );
  else rec.push("(the trace has no segment events: the recording allocator's reserved memory is unknown)");
  out.push(`recorded: ${rec.join(', ')}`);
  if (t.startedMidRun)
    out.push(
      `note: the recording started mid-run: ${t.startedMidRun.blocks} blocks (${formatBytes(t.startedMidRun.bytes, 2)}) in ${t.startedMidRun.segments} segments (${formatBytes(t.startedMidRun.reservedBytes, 2)} reserved) were live before its first event; the figures and the replay start from them`,
    );
  if (t.devices.length > 1)
    out.push(`note: the trace holds GPUs ${t.devices.join(', ')}; this is GPU ${t.device} alone (each GPU has its own memory; --device N for another)`);
  if (t.expandableSegments)
    out.push(
      'note: the recording allocator had expandable segments on (it mapped and unmapped pieces of growable segments); pytorch-expandable replays that setting, pytorch-like the default fixed segments',
    );
  if (t.untrackedFrees > 0) out.push(`note: ${t.untrackedFrees} frees of memory allocated before the trace began were ignored`);
  out.push('');
  out.push('replayed on a simulated device (no GPU; bytes counted, not measured):');
  out.push(
    table(
      [
        'configuration',
        '>peak requested',
        '>peak allocated',
        '>peak reserved',
        '>reserved/allocated',
        '>segment allocs',
        '>fragmentation at peak',
        '>smallest device',
      ],
      r.configurations.map((c) => [
        c.name,
        formatBytes(c.peakRequestedBytes, 2),
        formatBytes(c.peakAllocatedBytes, 2),
        formatBytes(c.peakReservedBytes, 2),
        c.reservedOverAllocated.toFixed(3),
        c.segmentAllocs,
        c.fragmentationAtPeak.toFixed(3),
        formatBytes(c.minDeviceBytes, 2),
      ]),
    ),
  );
  const best = [...r.configurations].sort((a, b) => a.peakReservedBytes - b.peakReservedBytes)[0];
  if (best) {
    out.push('');
    out.push(`lowest peak reserved: ${best.name} (${best.description}); runs on a device of ${formatBytes(best.minDeviceBytes, 2)} (GiB = 2^30 bytes)`);
  }
  out.push('');
  for (const c of r.configurations) out.push(`  ${c.name}: ${c.description}`);
  return out.join('\n');
}
