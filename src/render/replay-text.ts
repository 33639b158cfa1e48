/**
 * `gpumem pool replay TRACE`: text rendering of a replay report, fitted to the terminal (80 columns where none
 * says): the recorded facts as wrapped prose, one table of what each configuration reached with its columns named
 * below it, and the configurations' descriptions.
 */
import type { ReplayReport } from '../replay/replay.js';
import { formatBytes } from '../units.js';
import { table } from './text.js';
import { DEFAULT_WIDTH, wrapLine } from './width.js';

/** What the table's columns mean, printed under it: "fragmentation at peak" is defined nowhere else a user looks. */
const LEGEND = [
  'allocated, reserved: the most bytes allocated to tensors and reserved from the device at once;',
  'segments: segment allocations (memory asked of the device);',
  'frag.: fragmentation at peak, 1 - (largest free block / free bytes) in the pool when reserved memory last peaked: 0 when its free memory is one block, near 1 when it is scattered in pieces too small for a large request;',
  'min device: the smallest device (to 2 MiB) on which the replay runs without running out of memory.',
];

export function renderReplay(r: ReplayReport, options: { width?: number } = {}): string {
  const width = options.width ?? DEFAULT_WIDTH;
  const t = r.trace;
  const out: string[] = [];
  const say = (line: string, indent = ''): void => {
    out.push(...wrapLine(line, width, indent));
  };
  say(
    `trace: ${t.file} (${t.format}, device ${t.device}, ${t.events} events, ${t.allocations} allocations on ${t.streams} stream${t.streams === 1 ? '' : 's'})`,
    '  ',
  );
  const rec = [`peak requested ${formatBytes(t.peakRequestedBytes, 2)}`];
  if (t.peakReservedBytes !== undefined)
    rec.push(
      `peak reserved ${formatBytes(t.peakReservedBytes, 2)}`,
      t.segmentMaps ? `${t.segmentAllocs} segment allocations and ${t.segmentMaps} maps of expandable segments` : `${t.segmentAllocs} segment allocations`,
    );
  else rec.push("(the trace has no segment events: the recording allocator's reserved memory is unknown)");
  say(`recorded: ${rec.join(', ')}`, '  ');
  if (t.startedMidRun)
    say(
      `note: the recording started mid-run: ${t.startedMidRun.blocks} blocks (${formatBytes(t.startedMidRun.bytes, 2)}) in ${t.startedMidRun.segments} segments (${formatBytes(t.startedMidRun.reservedBytes, 2)} reserved) were live before its first event; the figures and the replay start from them`,
      '  ',
    );
  if (t.devices.length > 1)
    say(`note: the trace holds GPUs ${t.devices.join(', ')}; this is GPU ${t.device} alone (each GPU has its own memory; --device N for another)`, '  ');
  if (t.expandableSegments)
    say(
      'note: the recording allocator had expandable segments on (it mapped and unmapped pieces of growable segments); pytorch-expandable replays that setting, pytorch-like the default fixed segments',
      '  ',
    );
  if (t.untrackedFrees > 0) say(`note: ${t.untrackedFrees} frees of memory allocated before the trace began were ignored`, '  ');
  out.push('');
  say(`replayed on a simulated device (no GPU; bytes counted, not measured; the same ${formatBytes(t.peakRequestedBytes, 2)} requested at the peak in each):`);
  out.push(
    table(
      ['configuration', '>allocated', '>reserved', '>segments', '>frag.', '>min device'],
      r.configurations.map((c) => [
        c.name,
        formatBytes(c.peakAllocatedBytes, 2),
        formatBytes(c.peakReservedBytes, 2),
        c.segmentAllocs,
        c.fragmentationAtPeak.toFixed(3),
        formatBytes(c.minDeviceBytes, 2),
      ]),
      { width, priorities: [undefined, 3, undefined, 1, 2, 4] },
    ),
  );
  for (const line of LEGEND) say(line, '  ');
  const best = [...r.configurations].sort((a, b) => a.peakReservedBytes - b.peakReservedBytes)[0];
  if (best) {
    out.push('');
    say(`lowest peak reserved: ${best.name}; runs on a device of ${formatBytes(best.minDeviceBytes, 2)} (GiB = 2^30 bytes)`);
  }
  out.push('');
  for (const c of r.configurations) say(`  ${c.name}: ${c.description}`, '    ');
  return out.join('\n');
}
