/**
 * Allocator traces: PyTorch memory snapshots (torch.cuda.memory._snapshot(), .json or .json.gz; gpumem's pool
 * snapshots have the same shape) give segments and their blocks, and device_traces give allocation events and OOMs;
 * gpumem's NDJSON pool log and RMM's CSV log give allocation events.
 */
import { BadInputError } from '../../errors.js';
import { isJsonObject as isObj, walkJson, type Json, type JsonObject as Obj, type PathKey } from '../../input/json-stream.js';
import { EventKind, readTrace } from '../../formats/allocator-trace.js';
import { AllocLevel, type SnapshotSegment, type TraceModel } from '../model.js';
import { describe, optNumber } from '../../input/numbers.js';

/** Reads one snapshot segment into gpumem's summary of it. */
function segmentOf(v: Obj, where: string, file: string): SnapshotSegment {
  const n = (k: string): number => optNumber(v[k], `${where}.${k}`, file) ?? 0;
  const blocks = Array.isArray(v.blocks) ? v.blocks : [];
  const allocated = n('allocated_size');
  let inactiveSplitBytes = 0;
  let inactiveSplitBlocks = 0;
  let largestFreeBlock = 0;
  for (const [i, b] of blocks.entries()) {
    if (!isObj(b)) throw new BadInputError(`${where}.blocks[${i}] is ${describe(b)}`, file);
    const size = optNumber(b.size, `${where}.blocks[${i}].size`, file) ?? 0;
    if (b.state === 'inactive') {
      largestFreeBlock = Math.max(largestFreeBlock, size);
      if (allocated > 0) {
        inactiveSplitBytes += size;
        inactiveSplitBlocks++;
      }
    }
  }
  return {
    totalBytes: n('total_size'),
    allocatedBytes: allocated,
    activeBytes: n('active_size'),
    requestedBytes: n('requested_size'),
    inactiveSplitBytes,
    inactiveSplitBlocks,
    largestFreeBlock,
    stream: n('stream'),
  };
}

const ACTION_LEVEL: Record<string, [number, number]> = {
  alloc: [AllocLevel.framework, 1],
  free_completed: [AllocLevel.framework, -1],
  segment_alloc: [AllocLevel.driver, 1],
  segment_free: [AllocLevel.driver, -1],
  segment_map: [AllocLevel.driver, 1],
  segment_unmap: [AllocLevel.driver, -1],
};

/**
 * Reads a PyTorch or gpumem memory snapshot, streaming.
 * @throws BadInputError for malformed JSON or a file that is not a snapshot.
 */
export async function importSnapshot(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  let sawSegments = false;
  let sawTraces = false;
  let index = 0;
  const select = (p: readonly PathKey[]): boolean =>
    (p.length === 2 && p[0] === 'segments' && typeof p[1] === 'number') || (p.length === 3 && p[0] === 'device_traces' && typeof p[2] === 'number');
  const onValue = (p: readonly PathKey[], v: Json): void => {
    const where = p.join('.');
    if (!isObj(v)) throw new BadInputError(`${where} is ${describe(v)}, not an object`, file);
    if (p[0] === 'segments') {
      sawSegments = true;
      model.segments.push(segmentOf(v, where, file));
      return;
    }
    sawTraces = true;
    index++;
    if (v.action === 'oom') {
      model.ooms++;
      return;
    }
    const level = ACTION_LEVEL[String(v.action)];
    if (!level) return;
    const size = optNumber(v.size, `${where}.size`, file) ?? 0;
    const t = optNumber(v.time_us, `${where}.time_us`, file);
    model.allocs.push({
      time: t !== undefined ? model.time(t * 1000) : index,
      bytes: level[1] * size,
      device: Number(p[1]) || 0,
      address: optNumber(v.addr, `${where}.addr`, file) ?? Number.NaN,
      allocated: Number.NaN,
      reserved: Number.NaN,
      host: 0,
      agent: -1,
      level: level[0],
    });
  };
  await walkJson(file, select, onValue, { progress });
  if (!sawSegments && !sawTraces) throw new BadInputError('neither "segments" nor "device_traces": not a PyTorch / gpumem memory snapshot', file);
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
