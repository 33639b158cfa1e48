/**
 * Readers of allocation traces, into one columnar event list: PyTorch memory snapshots with device_traces (the pickle
 * `_dump_snapshot()` writes, or JSON, read as a stream so that gigabyte files work; gzip or not), gpumem's own NDJSON
 * log (LoggingAdaptor) or snapshot, and RMM's CSV log (logging_resource_adaptor: Thread,Time,Action,Pointer,Size,Stream).
 */
import { BadInputError } from '../errors.js';
import { fileSize, readFailure, sniffBytes } from '../input/files.js';
import { isPickle } from '../input/pickle.js';
import { readLines } from '../input/lines.js';
import { reqWhole } from '../input/numbers.js';
import { deviceTrace, readPytorchSnapshot } from './pytorch-snapshot.js';
import { snapshotEncoding } from './snapshot-file.js';
import { EventKind, type Extent, TraceEvents } from './trace-events.js';

export { EventKind, type Extent, TraceEvents } from './trace-events.js';

export type TraceFormat = 'pytorch' | 'gpumem' | 'rmm';

export interface Trace {
  file: string;
  format: TraceFormat;
  /** Devices the trace holds events for; replay uses `device`. */
  devices: number[];
  device: number;
  events: TraceEvents;
  /** True when the trace records free_completed (frees replay at completion, not at request). */
  hasFreeCompleted: boolean;
  /** True when every event carries its time (events.time); false for logs and snapshots without time_us. */
  hasTimes?: boolean | undefined;
  /** Allocator settings the recording allocator reported, when it did. */
  allocatorSettings?: Record<string, unknown> | undefined;
  /** True when the recording allocator used expandable segments (segment_map / segment_unmap events). */
  expandableSegments?: boolean | undefined;
  /**
   * The snapshot's own state of the device when it was taken (after the last event): its segments (an expandable
   * segment's mapped ranges) and the blocks in use. With the events, it tells what was live when recording began.
   */
  atEnd?: { segments: Extent[]; blocks: Extent[] } | undefined;
}

/**
 * Guesses a trace's format from its first bytes; a file that is plainly something else is refused here, before the
 * rest of it is read.
 * @throws BadInputError naming what the file looks like.
 */
export async function detectFormat(file: string): Promise<TraceFormat> {
  const head = sniffBytes(file);
  const t = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart();
  if (/^Thread\s*,\s*Time\s*,\s*Action/i.test(t)) return 'rmm';
  if (/^\{\s*"t"\s*:/.test(t)) return 'gpumem';
  if (t.startsWith('{') || t.startsWith('[') || t.startsWith('<') || isPickle(head)) {
    snapshotEncoding(file); // refuses JSON, pickles and HTML pages that are not snapshots, naming what they are
    return 'pytorch';
  }
  throw new BadInputError(
    `not a recognised allocation trace (expected a PyTorch memory snapshot as pickle or JSON, a gpumem NDJSON log or an RMM CSV log)${head.includes(0) ? ': a binary file' : `; it starts ${JSON.stringify(t.slice(0, 40))}`}`,
    file,
  );
}

/** An address, size or stream as a trace writes it (decimal or 0x hex; an empty CSV cell reads as 0). */
function num(v: unknown, what: string, file: string): number {
  return reqWhole(typeof v === 'string' && v.trim() === '' ? 0 : v, what, file);
}

/** Reads gpumem's NDJSON log (one object per line: { t, action, address, bytes, stream }). */
async function readNdjson(file: string, progress?: (bytes: number) => void): Promise<Trace> {
  const events = new TraceEvents();
  for await (const [text, line] of readLines(file, { maxLine: 1 << 16, progress })) {
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
async function readRmmCsv(file: string, progress?: (bytes: number) => void): Promise<Trace> {
  const events = new TraceEvents();
  let cols: Record<string, number> | undefined;
  for await (const [text, line] of readLines(file, { maxLine: 1 << 16, progress })) {
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
 * Reads an allocation trace of any supported format. `progress(bytes, size)` is called as the file is read (bytes as
 * read, which for gzip can pass the file's size).
 * @throws BadInputError naming the file and what is wrong with it.
 */
export async function readTrace(
  file: string,
  options: { format?: TraceFormat | 'auto'; device?: number; progress?: (bytes: number, total: number) => void } = {},
): Promise<Trace> {
  const size = fileSize(file);
  if (size === 0) throw new BadInputError('the file is empty', file);
  let trace: Trace;
  try {
    const format = !options.format || options.format === 'auto' ? await detectFormat(file) : options.format;
    const progress = (n: number): void => options.progress?.(n, size);
    trace =
      format === 'pytorch'
        ? deviceTrace(await readPytorchSnapshot(file, { progress }), options.device)
        : format === 'gpumem'
          ? await readNdjson(file, progress)
          : await readRmmCsv(file, progress);
  } catch (e) {
    throw readFailure(e, file);
  }
  if (options.device !== undefined && !trace.devices.includes(options.device)) {
    throw new BadInputError(`--device ${options.device}: the trace holds events of device ${trace.devices.join(', ')} only`, file);
  }
  if (trace.events.count(EventKind.Alloc) === 0) throw new BadInputError('the trace holds no allocations', file);
  return trace;
}
