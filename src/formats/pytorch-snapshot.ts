/**
 * PyTorch's memory snapshot (torch.cuda.memory._snapshot(); gpumem's pool snapshot has the same shape), read once
 * for every device it holds: each device's trace events (device_traces, in columns), its segments and their blocks
 * at the end of the recording, the allocator settings the recording allocator reported, and, when asked, the stack
 * traces of allocations (deduplicated into one table). From the pickle `_dump_snapshot()` writes or from JSON.
 */
import { BadInputError } from '../errors.js';
import { isJsonObject, type Json, type JsonObject, type PathKey } from '../input/json-stream.js';
import { reqNumber, reqWhole } from '../input/numbers.js';
import { type SnapshotEncoding, walkSnapshot } from './snapshot-file.js';
import { EventKind, type Extent, TraceEvents } from './trace-events.js';
import type { Trace } from './allocator-trace.js';

export type BlockState = 'active_allocated' | 'active_pending_free' | 'inactive';

/** A block of a segment when the snapshot was taken; `stack` indexes the snapshot's stack table (-1: none). */
export interface SnapshotBlock {
  address: number;
  size: number;
  requested: number;
  state: BlockState;
  stack: number;
}

/** A segment when the snapshot was taken. `size` is the memory behind it (an expandable segment's mapped range). */
export interface SnapshotSegmentState {
  device: number;
  address: number;
  size: number;
  stream: number;
  expandable: boolean;
  blocks: SnapshotBlock[];
}

/** One frame of a stack trace, as PyTorch records it. */
export interface Frame {
  name: string;
  filename: string;
  line: number;
}

export interface DeviceSnapshot {
  device: number;
  events: TraceEvents;
  segments: SnapshotSegmentState[];
}

export interface PytorchSnapshot {
  file: string;
  encoding: SnapshotEncoding;
  /** Every device the snapshot holds segments or events of, by number. */
  devices: DeviceSnapshot[];
  /** The snapshot holds trace events (recorded with _record_memory_history). */
  hasDeviceTraces: boolean;
  /** Every event carries time_us (older PyTorch wrote none). */
  hasTimes: boolean;
  /** The trace records free_completed (frees take effect then, not at free_requested). */
  hasFreeCompleted: boolean;
  allocatorSettings: Record<string, unknown> | undefined;
  /** Stack traces, when asked for: events and blocks index this table. */
  stacks: Frame[][];
  /**
   * Blocks whose address the snapshot does not hold (PyTorch 2.0 and before wrote none), placed by their segment's
   * address and the sizes of the blocks before them: a segment's blocks are listed in address order, back to back.
   */
  derivedAddresses: number;
}

const ACTIONS: Record<string, EventKind> = {
  alloc: EventKind.Alloc,
  free_requested: EventKind.FreeRequested,
  free_completed: EventKind.Free,
  segment_alloc: EventKind.SegmentAlloc,
  segment_free: EventKind.SegmentFree,
  segment_map: EventKind.SegmentMap,
  segment_unmap: EventKind.SegmentUnmap,
  oom: EventKind.Oom,
};

/** Frames kept per stack: the innermost, where the allocation was asked for. */
const MAX_FRAMES = 64;

/** Interns stack traces: the same frames (often the very same list, in a pickle) get one id. */
class StackTable {
  readonly stacks: Frame[][] = [];
  private readonly byList = new WeakMap<object, number>();
  private readonly byKey = new Map<string, number>();

  constructor(private readonly file: string) {}

  idOf(frames: Json | undefined, where: string): number {
    if (!Array.isArray(frames) || frames.length === 0) return -1;
    const known = this.byList.get(frames);
    if (known !== undefined) return known;
    const out: Frame[] = [];
    for (const [i, f] of frames.slice(0, MAX_FRAMES).entries()) {
      if (!isJsonObject(f)) throw new BadInputError(`${where}.frames[${i}] is not an object`, this.file);
      out.push({ name: String(f.name ?? '?'), filename: String(f.filename ?? '?'), line: typeof f.line === 'number' ? f.line : 0 });
    }
    const key = out.map((f) => `${f.name}\u0001${f.filename}\u0001${f.line}`).join('\u0002');
    let id = this.byKey.get(key);
    if (id === undefined) {
      id = this.stacks.push(out) - 1;
      this.byKey.set(key, id);
    }
    this.byList.set(frames, id);
    return id;
  }
}

const STATES: readonly string[] = ['active_allocated', 'active_pending_free', 'active_awaiting_free', 'inactive'];

/**
 * Reads a snapshot (pickle or JSON, gzip or not) for all its devices.
 * @throws BadInputError naming the file and what is wrong with it (UnsafePickleError for a pickle that would run code).
 */
export async function readPytorchSnapshot(file: string, options: { stacks?: boolean; progress?: (bytes: number) => void } = {}): Promise<PytorchSnapshot> {
  // sizes, addresses, streams and devices are whole numbers (a fractional one would reach the replay's pool as a size)
  const num = (v: unknown, what: string): number => reqWhole(v, what, file);
  const devices = new Map<number, DeviceSnapshot>();
  const deviceOf = (d: number): DeviceSnapshot => {
    let s = devices.get(d);
    if (!s) devices.set(d, (s = { device: d, events: new TraceEvents(), segments: [] }));
    return s;
  };
  const table = new StackTable(file);
  const stackOf = (v: JsonObject, where: string): number => (options.stacks ? table.idOf(v.frames, where) : -1);
  let hasDeviceTraces = false;
  let hasFreeCompleted = false;
  let untimed = 0;
  let timed = 0;
  let settings: Record<string, unknown> | undefined;
  // a list at the top is torch.cuda.memory_snapshot()'s: segments alone
  const select = (p: readonly PathKey[]): boolean =>
    (p.length === 1 && typeof p[0] === 'number') ||
    (p.length === 3 && p[0] === 'device_traces' && typeof p[2] === 'number') ||
    (p.length === 2 && p[0] === 'segments' && typeof p[1] === 'number') ||
    (p.length === 1 && p[0] === 'allocator_settings');
  let derived = 0;
  const onSegment = (v: Json, where: string): void => {
    if (!isJsonObject(v)) throw new BadInputError(`${where} is not an object`, file);
    const device = num(v.device ?? 0, `${where}.device`);
    const stream = num(v.stream ?? 0, `${where}.stream`);
    // gpumem's growable segments report their virtual range as total_size and the memory behind it as mapped_size
    const size = num(v.mapped_size ?? v.total_size, `${where}.total_size`);
    const address = num(v.address, `${where}.address`);
    const blocks: SnapshotBlock[] = [];
    let at = address;
    for (const [j, b] of (Array.isArray(v.blocks) ? v.blocks : []).entries()) {
      const w = `${where}.blocks[${j}]`;
      if (!isJsonObject(b)) throw new BadInputError(`${w} is not an object`, file);
      const state = STATES.includes(String(b.state)) ? (b.state === 'active_awaiting_free' ? 'active_pending_free' : (b.state as BlockState)) : undefined;
      if (!state) throw new BadInputError(`${w}.state is ${JSON.stringify(b.state)}, not one of ${STATES.join(', ')}`, file);
      const size = num(b.size, `${w}.size`);
      // PyTorch 2.0 kept a block's requested size and frames in its history (torch/cuda/_memory_viz.py _block_extra_legacy)
      const first = Array.isArray(b.history) && isJsonObject(b.history[0]) ? b.history[0] : undefined;
      if (b.address === undefined) derived++;
      const blockAddress = b.address === undefined ? at : num(b.address, `${w}.address`);
      at = blockAddress + size;
      blocks.push({
        address: blockAddress,
        size,
        requested: num(b.requested_size ?? first?.real_size ?? size, `${w}.requested_size`),
        state,
        stack: stackOf(b.frames === undefined && first ? first : b, w),
      });
    }
    deviceOf(device).segments.push({ device, address, size, stream, expandable: v.is_expandable === true, blocks });
  };
  const onEvent = (v: Json, device: number, where: string): void => {
    if (!isJsonObject(v)) throw new BadInputError(`${where} is not an object`, file);
    const kind = ACTIONS[String(v.action)];
    if (kind === undefined) return; // snapshot markers, annotations and other actions do not change memory
    if (kind === EventKind.Free) hasFreeCompleted = true;
    let time = Number.NaN;
    if (v.time_us === undefined || v.time_us === null) untimed++;
    else {
      time = reqNumber(v.time_us, `${where}.time_us`, file, Number.MAX_SAFE_INTEGER);
      timed++;
    }
    const addr = kind === EventKind.Oom ? 0 : num(v.addr ?? 0, `${where}.addr`);
    deviceOf(device).events.push(kind, addr, num(v.size ?? 0, `${where}.size`), num(v.stream ?? 0, `${where}.stream`), time, stackOf(v, where));
  };
  const encoding = await walkSnapshot(
    file,
    select,
    (p, v) => {
      if (p[0] === 'allocator_settings') {
        if (isJsonObject(v)) settings = v;
      } else if (typeof p[0] === 'number') onSegment(v, `[${p[0]}]`);
      else if (p[0] === 'segments') onSegment(v, `segments[${String(p[1])}]`);
      else {
        hasDeviceTraces = true;
        onEvent(v, p[1] as number, `device_traces[${String(p[1])}][${String(p[2])}]`);
      }
    },
    { progress: options.progress },
  );
  return {
    file,
    encoding,
    devices: [...devices.values()].sort((a, b) => a.device - b.device),
    hasDeviceTraces,
    hasTimes: timed > 0 && untimed === 0,
    hasFreeCompleted,
    allocatorSettings: settings,
    stacks: table.stacks,
    derivedAddresses: derived,
  };
}

/** Whether the recording allocator used expandable segments: its settings say so, or its segments are expandable. */
export function expandableSegmentsOn(snap: PytorchSnapshot): boolean {
  const s = snap.allocatorSettings;
  if (s?.expandable_segments === true) return true;
  const conf = typeof s?.PYTORCH_CUDA_ALLOC_CONF === 'string' ? s.PYTORCH_CUDA_ALLOC_CONF : '';
  if (/expandable_segments\s*:\s*(true|1)\b/i.test(conf)) return true;
  return snap.devices.some((d) => d.segments.some((x) => x.expandable));
}

/** Blocks live at the end (allocated, or freed but waiting on a stream, by the bytes requested) and segments, as extents. */
function atEndOf(d: DeviceSnapshot): { segments: Extent[]; blocks: Extent[] } {
  const segments: Extent[] = [];
  const blocks: Extent[] = [];
  for (const s of d.segments) {
    if (s.size > 0) segments.push({ address: s.address, size: s.size, stream: s.stream });
    // the requested size, as alloc events give it: the block's own size is the allocator's rounding of it
    for (const b of s.blocks) if (b.state !== 'inactive') blocks.push({ address: b.address, size: b.requested, stream: s.stream });
  }
  return { segments, blocks };
}

/**
 * One device's replayable trace.
 * @throws BadInputError when the snapshot has no device_traces or no events for that device.
 */
export function deviceTrace(snap: PytorchSnapshot, device?: number): Trace {
  const file = snap.file;
  if (!snap.hasDeviceTraces)
    throw new BadInputError(
      'the snapshot has no device_traces (record with torch.cuda.memory._record_memory_history() before the run, then torch.cuda.memory._dump_snapshot())',
      file,
    );
  const withEvents = snap.devices.filter((d) => d.events.length > 0).map((d) => d.device);
  const want = device ?? withEvents[0] ?? 0;
  const d = snap.devices.find((x) => x.device === want && x.events.length > 0);
  if (!d) throw new BadInputError(`the trace has no events for device ${want} (it has: ${withEvents.join(', ') || 'none'})`, file);
  return {
    file,
    format: 'pytorch',
    devices: withEvents,
    device: want,
    events: d.events,
    hasFreeCompleted: snap.hasFreeCompleted,
    hasTimes: snap.hasTimes,
    allocatorSettings: snap.allocatorSettings,
    expandableSegments: expandableSegmentsOn(snap),
    atEnd: snap.devices.some((x) => x.segments.length > 0) ? atEndOf(d) : undefined,
  };
}
