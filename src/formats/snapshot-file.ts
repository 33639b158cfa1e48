/**
 * A PyTorch memory snapshot on disk, in any of the forms it is saved in: the pickle that
 * `torch.cuda.memory._dump_snapshot()` writes (gzip or not), JSON (`json.dump(torch.cuda.memory._snapshot(), f)`,
 * and gpumem's own pool snapshot), or the HTML page of PyTorch's memory_viz (`torch.cuda._memory_viz.trace_plot`,
 * `segment_plot`, PyTorch 2.1 and later), which holds the snapshot's pickle in base64 in its script:
 * `const local_files = [{"name": "snapshot.pickle", "base64": "..."}]`. Recognised from its first bytes, so that a
 * file of another kind is refused before it is read, and walked as one stream of selected values whichever form it has.
 */
import { BadInputError } from '../errors.js';
import { readFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { isGzipFile, sniffBytes } from '../input/files.js';
import { walkJsonChunked } from '../input/json-chunks.js';
import type { Json, PathKey } from '../input/json-stream.js';
import { isPickle, MAX_PICKLE_BYTES, parsePickle, pickleHead, readPickleFile, walkPickle, type PickleValue } from '../input/pickle.js';

/** Top-level keys of a snapshot (PyTorch's, and gpumem's pool snapshot's `allocator`). */
export const SNAPSHOT_KEYS: readonly string[] = [
  'segments',
  'device_traces',
  'allocator_settings',
  'external_annotations',
  'host_segments',
  'host_traces',
  'allocator',
];

/** The start of a list of segments, as torch.cuda.memory_snapshot() returns them. */
const SEGMENT_LIST =
  /^\[\s*(\{\s*"(device|address|total_size|allocated_size|active_size|requested_size|stream|segment_type|segment_pool_id|is_expandable|blocks)"\s*:)/;

/** Whether a JSON text starts as a list of segments (torch.cuda.memory_snapshot()), a snapshot of segments alone. */
export function isSegmentList(text: string): boolean {
  return SEGMENT_LIST.test(text.replace(/^\uFEFF/, '').trimStart());
}

export type SnapshotEncoding = 'json' | 'pickle' | 'memory-viz-html';

/** An HTML page, by its first bytes. */
const HTML = /^\s*(<!doctype html|<html|<head|<body|<script)/i;

/** Whether the first bytes are those of PyTorch's memory_viz page, which embeds a snapshot (add_local_files). */
export function isMemoryVizPage(head: Buffer): boolean {
  const t = head.toString('utf8').replace(/^\uFEFF/, '');
  return HTML.test(t) && /\badd_local_files\b/.test(t);
}

/** What other JSON files start with, for a refusal that names what the file is. */
const OTHER_JSON: ReadonlyArray<[RegExp, string]> = [
  [
    /^(traceEvents|schemaVersion|deviceProperties|displayTimeUnit|distributedInfo)$/,
    'a profiler trace (Kineto / Chrome trace JSON): `gpumem analyze` reads it',
  ],
  [/^rocprofiler-sdk-tool$/, 'a rocprofv3 JSON trace: `gpumem analyze` reads it'],
  [/^(schema|nodes)$/, 'a PyTorch execution trace, which records operators, not allocations'],
];

/** Why a snapshot reader refuses the file, or undefined when it may be a snapshot; `head` is its first bytes. */
function refusalOf(head: Buffer): string | undefined {
  if (isPickle(head)) {
    const h = pickleHead(head);
    if (h?.startsWith) return `a Python pickle of ${h.startsWith}, not a memory snapshot (a snapshot pickle holds a dict of plain data)`;
    if (h?.firstKey !== undefined && !SNAPSHOT_KEYS.includes(h.firstKey))
      return `a Python pickle of a dict whose first key is ${JSON.stringify(h.firstKey.slice(0, 60))}, not a memory snapshot (its keys are ${SNAPSHOT_KEYS.slice(0, 3).join(', ')}...)`;
    return undefined;
  }
  const t = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart();
  if (HTML.test(t) && !/\badd_local_files\b/.test(t))
    return /MemoryViz|_memory_viz|\$PLOT_DATA|alloc_data/.test(t)
      ? "an HTML page of PyTorch 2.0's memory_viz, which holds the plot's data, not the snapshot: analyze the snapshot pickle it was drawn from"
      : 'an HTML page without a memory snapshot in it (the memory_viz pages of PyTorch 2.1 and later embed one): give the snapshot pickle, or such a page';
  // torch.cuda.memory_snapshot() gives the segments alone, as a list
  if (t.startsWith('[') && !SEGMENT_LIST.test(t)) return 'a JSON array, not a memory snapshot (a snapshot is a JSON object with segments and device_traces)';
  if (!t.startsWith('{')) return undefined;
  const key = /^\{\s*"((?:[^"\\]|\\.){0,200})"\s*:/.exec(t)?.[1];
  if (key === undefined || SNAPSHOT_KEYS.includes(key)) return undefined;
  const other = OTHER_JSON.find(([re]) => re.test(key));
  return other
    ? `${other[1]}, not a memory snapshot`
    : `a JSON object whose first key is ${JSON.stringify(key.slice(0, 60))}, not a memory snapshot (its keys are ${SNAPSHOT_KEYS.slice(0, 3).join(', ')}...)`;
}

/**
 * How the file holds a snapshot, judged from its first bytes: a pickle of protocol 2 to 5, or JSON. A JSON or pickle
 * file that is plainly something else is refused here, before a byte more is read.
 * @throws BadInputError naming what the file looks like.
 */
export function snapshotEncoding(file: string): SnapshotEncoding {
  const head = sniffBytes(file, 8192);
  const why = refusalOf(head);
  if (why) throw new BadInputError(why, file);
  if (isPickle(head)) return 'pickle';
  if (isMemoryVizPage(head)) return 'memory-viz-html';
  const text = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart();
  if (text.startsWith('{') || SEGMENT_LIST.test(text)) return 'json';
  throw new BadInputError('not a memory snapshot: neither JSON nor a Python pickle', file);
}

/** True when the file's first bytes are those of a pickle (gzip or not). */
export function isPickleFile(file: string): boolean {
  return isPickle(sniffBytes(file, 16));
}

/**
 * Calls `onValue(path, value)` for each value of the snapshot whose path `select` accepts, as walkJson does, from a
 * pickle or a JSON file. `progress(bytes)` counts bytes of the file as stored (a pickle is read whole, then parsed).
 * @throws BadInputError for a file that is not a snapshot, malformed or truncated input, or a pickle that would run
 * code (UnsafePickleError).
 */
export async function walkSnapshot(
  file: string,
  select: (path: readonly PathKey[]) => boolean,
  onValue: (path: readonly PathKey[], value: Json) => void,
  options: { progress?: (bytes: number) => void } = {},
): Promise<SnapshotEncoding> {
  const encoding = snapshotEncoding(file);
  if (encoding === 'json') {
    // device_traces holds one array of events per device: each is cut into chunks as a top-level array would be
    await walkJsonChunked(file, select, onValue, { progress: options.progress, descend: (p) => p.length === 1 && p[0] === 'device_traces' });
    return encoding;
  }
  const root = encoding === 'pickle' ? await readPickleFile(file, { progress: options.progress, exactInts: false }) : await readMemoryVizPage(file);
  const segmentList = Array.isArray(root) && root.every((x) => x !== null && typeof x === 'object' && !Array.isArray(x) && 'total_size' in x);
  if (root === null || typeof root !== 'object' || (Array.isArray(root) && !segmentList) || root instanceof Uint8Array)
    throw new BadInputError('the pickle holds no dict: not a memory snapshot', file);
  // with exactInts false the values are JSON's kinds, bar bytes, which no snapshot holds and every field check refuses
  walkPickle(root, select, (p, v) => onValue(p, v as Json), { file });
  return encoding;
}

/**
 * The snapshot a memory_viz page embeds: the first of its local files, a pickle in base64 (padded with NUL bytes
 * after its STOP, which the reader ignores).
 * @throws BadInputError for a page whose script holds no base64 file, or a pickle too large or not plain data.
 */
async function readMemoryVizPage(file: string): Promise<PickleValue> {
  let raw = await readFile(file);
  if (isGzipFile(file)) raw = gunzipSync(raw, { maxOutputLength: (MAX_PICKLE_BYTES / 3) * 4 + (1 << 20) });
  const text = raw.toString('latin1');
  const m = /"base64"\s*:\s*"([A-Za-z0-9+/=\s]*)"/.exec(text);
  if (!m?.[1]) throw new BadInputError('a memory_viz page whose script holds no base64 snapshot (local_files is empty)', file);
  const buf = Buffer.from(m[1], 'base64');
  if (buf.length > MAX_PICKLE_BYTES)
    throw new BadInputError(`the page's snapshot holds more than ${MAX_PICKLE_BYTES / 2 ** 30} GiB: too large to read whole`, file);
  if (!isPickle(buf)) throw new BadInputError("the page's embedded file is not a pickle: not a memory snapshot", file);
  return parsePickle(buf, { file, exactInts: false });
}
