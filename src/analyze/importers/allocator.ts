/**
 * Allocator traces: PyTorch memory snapshots (the pickle torch.cuda.memory._dump_snapshot() writes, or JSON; gpumem's
 * pool snapshots have the same shape) give segments and their blocks per device, and device_traces give allocation
 * events and OOMs; gpumem's NDJSON pool log and RMM's CSV log give allocation events.
 */
import { BadInputError } from '../../errors.js';
import { EventKind, readTrace } from '../../formats/allocator-trace.js';
import { expandableSegmentsOn, readPytorchSnapshot, type SnapshotSegmentState } from '../../formats/pytorch-snapshot.js';
import { AllocLevel, type SnapshotSegment, type TraceModel } from '../model.js';

/** gpumem's summary of one snapshot segment. */
function segmentOf(s: SnapshotSegmentState): SnapshotSegment {
  let allocated = 0;
  let active = 0;
  let requested = 0;
  let free = 0;
  let freeBlocks = 0;
  let largestFreeBlock = 0;
  for (const b of s.blocks) {
    if (b.state === 'inactive') {
      free += b.size;
      freeBlocks++;
      largestFreeBlock = Math.max(largestFreeBlock, b.size);
      continue;
    }
    active += b.size;
    if (b.state === 'active_allocated') {
      allocated += b.size;
      requested += b.requested;
    }
  }
  // free blocks count as split only beside live ones: a wholly free segment is cache that empty_cache() releases
  const split = allocated > 0;
  return {
    totalBytes: s.size,
    allocatedBytes: allocated,
    activeBytes: active,
    requestedBytes: requested,
    inactiveSplitBytes: split ? free : 0,
    inactiveSplitBlocks: split ? freeBlocks : 0,
    largestFreeBlock,
    stream: s.stream,
    device: s.device,
    expandable: s.expandable,
  };
}

const LEVEL: Partial<Record<EventKind, [number, number]>> = {
  [EventKind.Alloc]: [AllocLevel.framework, 1],
  [EventKind.Free]: [AllocLevel.framework, -1],
  [EventKind.SegmentAlloc]: [AllocLevel.driver, 1],
  [EventKind.SegmentFree]: [AllocLevel.driver, -1],
  [EventKind.SegmentMap]: [AllocLevel.driver, 1],
  [EventKind.SegmentUnmap]: [AllocLevel.driver, -1],
};

/**
 * Reads a PyTorch or gpumem memory snapshot (pickle or JSON) into the model, every device it holds.
 * @throws BadInputError for malformed input, a file that is not a snapshot, or a pickle that would run code.
 */
export async function importSnapshot(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  const snap = await readPytorchSnapshot(file, { progress });
  const segments = snap.devices.reduce((n, d) => n + d.segments.length, 0);
  if (segments === 0 && !snap.hasDeviceTraces) throw new BadInputError('neither "segments" nor "device_traces": not a PyTorch / gpumem memory snapshot', file);
  let events = 0;
  for (const d of snap.devices) {
    for (const s of d.segments) model.segments.push(segmentOf(s));
    const e = d.events;
    for (let i = 0; i < e.length; i++) {
      const k = e.kind[i]! as EventKind;
      if (k === EventKind.Oom) {
        model.ooms++;
        continue;
      }
      const level = LEVEL[k];
      if (!level) continue;
      model.allocs.push({
        time: snap.hasTimes ? model.time(e.time[i]! * 1000) : events,
        bytes: level[1] * e.size[i]!,
        device: d.device,
        address: e.addr[i]!,
        allocated: Number.NaN,
        reserved: Number.NaN,
        host: 0,
        agent: -1,
        level: level[0],
      });
      events++;
    }
  }
  if (!snap.hasTimes && events > 0) {
    model.allocsOrderOnly = true;
    model.note(
      `${file}: the snapshot records no times (no time_us: PyTorch before 2.1 wrote none); its ${events} events keep their order, and no span is given`,
    );
  }
  if (snap.derivedAddresses > 0)
    model.note(
      `${file}: ${snap.derivedAddresses} blocks carry no address (PyTorch 2.0 and before wrote none): each placed at its segment's address plus the sizes of the blocks before it`,
    );
  model.allocatorSettings = snap.allocatorSettings;
  model.expandableSegments = expandableSegmentsOn(snap);
  model.formats.add('memory-snapshot');
}

/**
 * Reads gpumem's NDJSON pool log or RMM's CSV log (allocation events, in order; their times are not kept).
 * @throws BadInputError for malformed input.
 */
export async function importAllocLog(file: string, model: TraceModel): Promise<void> {
  const trace = await readTrace(file);
  const e = trace.events;
  for (let i = 0; i < e.length; i++) {
    const k = e.kind[i];
    if (k !== EventKind.Alloc && k !== EventKind.Free) continue;
    model.allocs.push({
      time: i,
      bytes: (k === EventKind.Alloc ? 1 : -1) * e.size[i]!,
      device: trace.device,
      address: e.addr[i]!,
      allocated: Number.NaN,
      reserved: Number.NaN,
      host: 0,
      agent: -1,
      level: AllocLevel.framework,
    });
  }
  model.note(`${file}: an allocation log keeps the order of events, not their times`);
  model.formats.add(trace.format === 'rmm' ? 'rmm-log' : 'gpumem-pool-log');
}
