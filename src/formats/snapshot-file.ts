/**
 * A PyTorch memory snapshot on disk, in either of the forms it is saved in: the pickle that
 * `torch.cuda.memory._dump_snapshot()` writes (gzip or not), or JSON (`json.dump(torch.cuda.memory._snapshot(), f)`,
 * and gpumem's own pool snapshot). Recognised from its first bytes, so that a file of another kind is refused before
 * it is read, and walked as one stream of selected values whichever form it has.
 */
import { BadInputError } from '../errors.js';
import { sniffBytes } from '../input/files.js';
import { walkJsonChunked } from '../input/json-chunks.js';
import type { Json, PathKey } from '../input/json-stream.js';
import { isPickle, pickleHead, readPickleFile, walkPickle } from '../input/pickle.js';

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

export type SnapshotEncoding = 'json' | 'pickle';

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
  if (t.startsWith('[')) return 'a JSON array, not a memory snapshot (a snapshot is a JSON object with segments and device_traces)';
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
  if (
    head
      .toString('utf8')
      .replace(/^\uFEFF/, '')
      .trimStart()
      .startsWith('{')
  )
    return 'json';
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
  const root = await readPickleFile(file, { progress: options.progress, exactInts: false });
  if (root === null || typeof root !== 'object' || Array.isArray(root) || root instanceof Uint8Array)
    throw new BadInputError('the pickle holds no dict: not a memory snapshot', file);
  // with exactInts false the values are JSON's kinds, bar bytes, which no snapshot holds and every field check refuses
  walkPickle(root, select, (p, v) => onValue(p, v as Json), { file });
  return encoding;
}
