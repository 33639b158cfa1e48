/**
 * Readers of allocation traces, into one columnar event list: PyTorch memory snapshots with device_traces (.json or
 * .json.gz; read as a stream, so gigabyte files work), gpumem's own NDJSON log (LoggingAdaptor) or snapshot, and
 * RMM's CSV log (logging_resource_adaptor: Thread,Time,Action,Pointer,Size,Stream).
 */
import { statSync } from 'node:fs';
import { BadInputError } from '../errors.js';
import { sniffText } from '../input/files.js';
import { isJsonObject, walkJson, type PathKey } from '../input/json-stream.js';
import { readLines } from '../input/lines.js';
import { reqNumber } from '../input/numbers.js';

export type TraceFormat = 'pytorch' | 'gpumem' | 'rmm';

/** Event kinds kept for replay. */
export const enum EventKind {
  Alloc = 0,
  Free = 1,
  SegmentAlloc = 2,
  SegmentFree = 3,
  SegmentMap = 4,
  SegmentUnmap = 5,
  Oom = 6,
  FreeRequested = 7,
}

/** Events in columns (typed arrays grow as needed): a million events cost 25 MB, not a million objects. */
export class TraceEvents {
  kind = new Uint8Array(1024);
  addr = new Float64Array(1024);
  size = new Float64Array(1024);
  stream = new Float64Array(1024);
  length = 0;

  push(kind: EventKind, addr: number, size: number, stream: number): void {
    if (this.length === this.kind.length) this.growTo(this.length * 2);
    const i = this.length++;
    this.kind[i] = kind;
    this.addr[i] = addr;
    this.size[i] = size;
    this.stream[i] = stream;
  }

  private growTo(n: number): void {
    const k = new Uint8Array(n);
    k.set(this.kind);
    this.kind = k;
    for (const f of ['addr', 'size', 'stream'] as const) {
      const a = new Float64Array(n);
      a.set(this[f]);
      this[f] = a;
    }
  }

  count(kind: EventKind): number {
    let n = 0;
    for (let i = 0; i < this.length; i++) if (this.kind[i] === kind) n++;
    return n;
  }
}

/** A block or segment of memory: its address, bytes and stream. */
export interface Extent {
  address: number;
  size: number;
  stream: number;
}

export interface Trace {
  file: string;
  format: TraceFormat;
  /** Devices the trace holds events for; replay uses `device`. */
  devices: number[];
  device: number;
  events: TraceEvents;
  /** True when the trace records free_completed (frees replay at completion, not at request). */
  hasFreeCompleted: boolean;
  /** Allocator settings the recording allocator reported, when it did. */
  allocatorSettings?: Record<string, unknown> | undefined;
  /**
   * The snapshot's own state of the device when it was taken (after the last event): its segments and the blocks
   * in use. With the events, it tells what was live when recording began.
   */
  atEnd?: { segments: Extent[]; blocks: Extent[] } | undefined;
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

/** Guesses a trace's format from its first bytes. */
export async function detectFormat(file: string): Promise<TraceFormat> {
  const text = sniffText(file);
  const t = text.trimStart();
  if (/^Thread\s*,\s*Time\s*,\s*Action/i.test(t)) return 'rmm';
  if (t.startsWith('{"t":') || /^\{\s*"t"\s*:/.test(t)) return 'gpumem';
  if (t.startsWith('{')) return 'pytorch';
  throw new BadInputError('not a recognised allocation trace (expected a PyTorch/gpumem snapshot JSON, a gpumem NDJSON log or an RMM CSV log)', file);
}

/** An address, size or stream as a trace writes it (decimal or 0x hex; an empty CSV cell reads as 0). */
function num(v: unknown, what: string, file: string): number {
  return reqNumber(typeof v === 'string' && v.trim() === '' ? 0 : v, what, file, Number.MAX_SAFE_INTEGER);
}

/** Reads the device_traces of a PyTorch (or gpumem) snapshot, streaming. */
async function readSnapshot(file: string, wantDevice: number | undefined): Promise<Trace> {
  const perDevice = new Map<number, TraceEvents>();
  let freeCompleted = false;
  let settings: Record<string, unknown> | undefined;
  let sawTraces = false;
  const atEnd = new Map<number, { segments: Extent[]; blocks: Extent[] }>();
  const select = (p: readonly PathKey[]): boolean =>
    (p.length === 3 && p[0] === 'device_traces' && typeof p[2] === 'number') ||
    (p.length === 2 && p[0] === 'segments' && typeof p[1] === 'number') ||
    (p.length === 1 && p[0] === 'allocator_settings');
  await walkJson(file, select, (p, v) => {
    if (p[0] === 'allocator_settings') {
      if (isJsonObject(v)) settings = v;
      return;
    }
    if (p[0] === 'segments') {
      if (!isJsonObject(v)) throw new BadInputError(`segments[${String(p[1])}] is not an object`, file);
      const where = `segments[${String(p[1])}]`;
      const device = num(v.device ?? 0, `${where}.device`, file);
      const stream = num(v.stream ?? 0, `${where}.stream`, file);
      let state = atEnd.get(device);
      if (!state) atEnd.set(device, (state = { segments: [], blocks: [] }));
      state.segments.push({ address: num(v.address, `${where}.address`, file), size: num(v.total_size, `${where}.total_size`, file), stream });
      const blocks = Array.isArray(v.blocks) ? v.blocks : [];
      for (const [j, b] of blocks.entries()) {
        if (!isJsonObject(b)) throw new BadInputError(`${where}.blocks[${j}] is not an object`, file);
        if (b.state !== 'active_allocated' && b.state !== 'active_pending_free') continue;
        state.blocks.push({ address: num(b.address, `${where}.blocks[${j}].address`, file), size: num(b.size, `${where}.blocks[${j}].size`, file), stream });
      }
      return;
    }
    sawTraces = true;
    if (!isJsonObject(v) || !('action' in v)) return;
    const kind = ACTIONS[String(v.action)];
    if (kind === undefined) return; // snapshot markers and other actions do not change memory
    if (kind === EventKind.Free) freeCompleted = true;
    const device = p[1] as number;
    let ev = perDevice.get(device);
    if (!ev) perDevice.set(device, (ev = new TraceEvents()));
    ev.push(kind, num(v.addr ?? 0, 'addr', file), num(v.size ?? 0, 'size', file), num(v.stream ?? 0, 'stream', file));
  });
  if (!sawTraces)
    throw new BadInputError(
      'the snapshot has no device_traces (record with torch.cuda.memory._record_memory_history and save torch.cuda.memory._snapshot() as JSON)',
      file,
    );
  const devices = [...perDevice.keys()].sort((a, b) => a - b);
  const device = wantDevice ?? devices[0] ?? 0;
  const events = perDevice.get(device);
  if (!events) throw new BadInputError(`the trace has no events for device ${device} (it has: ${devices.join(', ') || 'none'})`, file);
  return {
    file,
    format: 'pytorch',
    devices,
    device,
    events,
    hasFreeCompleted: freeCompleted,
    allocatorSettings: settings,
    atEnd: atEnd.get(device) ?? (atEnd.size > 0 ? { segments: [], blocks: [] } : undefined),
  };
}

/** Reads gpumem's NDJSON log (one object per line: { t, action, address, bytes, stream }). */
async function readNdjson(file: string): Promise<Trace> {
  const events = new TraceEvents();
  for await (const [text, line] of readLines(file, { maxLine: 1 << 16 })) {
    if (text.trim() === '') continue;
    let o: { action?: unknown; address?: unknown; bytes?: unknown; stream?: unknown };
    try {
      o = JSON.parse(text) as typeof o;
    } catch {
      throw new BadInputError(`line ${line} is not JSON`, file);
    }
    if (o.action === 'allocate_failed') continue;
    if (o.action !== 'allocate' && o.action !== 'deallocate') throw new BadInputError(`line ${line}: unknown action ${JSON.stringify(o.action)}`, file);
    events.push(
      o.action === 'allocate' ? EventKind.Alloc : EventKind.Free,
      num(o.address, `line ${line} address`, file),
      num(o.bytes, `line ${line} bytes`, file),
      num(o.stream ?? 0, `line ${line} stream`, file),
    );
  }
  return { file, format: 'gpumem', devices: [0], device: 0, events, hasFreeCompleted: true };
}

/** Reads RMM's CSV log. */
async function readRmmCsv(file: string): Promise<Trace> {
  const events = new TraceEvents();
  let cols: Record<string, number> | undefined;
  for await (const [text, line] of readLines(file, { maxLine: 1 << 16 })) {
    if (text.trim() === '') continue;
    const cells = text.split(',').map((c) => c.trim());
    if (!cols) {
      cols = Object.fromEntries(cells.map((c, i) => [c.toLowerCase(), i]));
      for (const need of ['action', 'pointer', 'size']) if (cols[need] === undefined) throw new BadInputError(`the CSV header has no ${need} column`, file);
      continue;
    }
    const action = cells[cols.action!]?.toLowerCase() ?? '';
    if (action.startsWith('allocate fail') || action === 'allocate_failure') continue;
    if (action !== 'allocate' && action !== 'deallocate' && action !== 'free')
      throw new BadInputError(`line ${line}: unknown action ${JSON.stringify(action)}`, file);
    const stream = cols.stream !== undefined ? num(cells[cols.stream] ?? '0', `line ${line} stream`, file) : 0;
    events.push(
      action === 'allocate' ? EventKind.Alloc : EventKind.Free,
      num(cells[cols.pointer!], `line ${line} pointer`, file),
      num(cells[cols.size!], `line ${line} size`, file),
      stream,
    );
  }
  if (!cols) throw new BadInputError('the file is empty', file);
  return { file, format: 'rmm', devices: [0], device: 0, events, hasFreeCompleted: true };
}

/**
 * Reads an allocation trace of any supported format.
 * @throws BadInputError naming the file and what is wrong with it.
 */
export async function readTrace(file: string, options: { format?: TraceFormat | 'auto'; device?: number } = {}): Promise<Trace> {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    throw new BadInputError('cannot read the file', file);
  }
  if (size === 0) throw new BadInputError('the file is empty', file);
  let trace: Trace;
  try {
    const format = !options.format || options.format === 'auto' ? await detectFormat(file) : options.format;
    trace = format === 'pytorch' ? await readSnapshot(file, options.device) : format === 'gpumem' ? await readNdjson(file) : await readRmmCsv(file);
  } catch (e) {
    if (e instanceof BadInputError) throw e;
    throw new BadInputError(`cannot read it: ${(e as Error).message} (truncated or corrupt?)`, file, { cause: e });
  }
  if (options.device !== undefined && !trace.devices.includes(options.device)) {
    throw new BadInputError(`--device ${options.device}: the trace holds events of device ${trace.devices.join(', ')} only`, file);
  }
  if (trace.events.count(EventKind.Alloc) === 0) throw new BadInputError('the trace holds no allocations', file);
  return trace;
}
