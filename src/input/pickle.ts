/**
 * A Python pickle reader that executes nothing: the opcodes of protocols 2 to 5 that plain data uses (dicts, lists,
 * tuples, sets, strings, bytes, ints, floats, bools, None, the memo), for the files `torch.cuda.memory._dump_snapshot()`
 * writes (`pickle.dump` of a dict of such values). Every opcode that imports a name, calls, builds an object or reaches
 * outside the file (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT, out-of-band buffers) is
 * refused with an {@link UnsafePickleError} naming it, except a short list of names whose meaning is plain data
 * (`collections.OrderedDict()`, the `set([...])` and `_codecs.encode(text, 'latin1')` protocol 2 writes for sets and
 * bytes, and the list builders and type tags of TorchScript's pickler), which are interpreted here as data and never
 * looked up. The machine itself is in unpickler.ts.
 *
 * Why not the npm package pickleparser (ewfian/pickleparser 0.2.1): by default it turns every class into a placeholder
 * object and runs REDUCE on whatever its resolver returns, its object mode assigns keys with `obj[key] = value` (a
 * `"__proto__"` key replaces the prototype), it reads LONG1 as unsigned (-2^40 comes back as 2^64 - 2^40), and its
 * published version predates its fix of DICT in Map mode (commit 6bdd76d). This reader is small enough to check.
 *
 * Values come back as JSON would: dicts as null-prototype objects (non-string keys written as JSON writes them),
 * tuples and sets as arrays; ints outside ±2^53 as bigint (exact), bytes as Uint8Array.
 */
import { BadInputError } from '../errors.js';
import { fileSize, isGzipFile, maxInflatedBytes, openInput, readFailure } from './files.js';
import { isPickle, parsePickle, type PickleValue } from './unpickler.js';

export { isPickle, parsePickle, UnsafePickleError, type PickleDict, type PickleOptions, type PickleValue } from './unpickler.js';

/**
 * What the first bytes of a pickle say about its top-level value, without reading it: the protocol, and either the
 * first string key of a top-level dict or the name of a class it starts with (a model's state dict, a tensor).
 */
export function pickleHead(head: Uint8Array): { protocol: number; firstKey?: string; startsWith?: string } | undefined {
  if (!isPickle(head)) return undefined;
  const protocol = head[1]!;
  const b = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  let p = 2;
  if (b[p] === 0x95) p += 9; // FRAME and its length
  const op = b[p];
  if (op === 0x63) {
    const end = b.indexOf(0x0a, p + 1);
    const end2 = end < 0 ? -1 : b.indexOf(0x0a, end + 1);
    if (end2 > 0) return { protocol, startsWith: `${b.toString('latin1', p + 1, end)}.${b.toString('latin1', end + 1, end2)}` };
    return { protocol, startsWith: 'a class (GLOBAL)' };
  }
  if (op === 0x8c) {
    // STACK_GLOBAL: the module and the name come first as short strings, each perhaps memoized
    const short = (at: number): [string, number] | undefined =>
      b[at] === 0x8c && at + 2 + b[at + 1]! <= b.length ? [b.toString('utf8', at + 2, at + 2 + b[at + 1]!), at + 2 + b[at + 1]!] : undefined;
    const m = short(p);
    const n = m && short(b[m[1]] === 0x94 ? m[1] + 1 : m[1]);
    return { protocol, startsWith: m && n ? `${m[0]}.${n[0]}` : 'a class (STACK_GLOBAL)' };
  }
  if (op !== 0x7d) return { protocol };
  p++;
  if (b[p] === 0x94) p++;
  else if (b[p] === 0x71) p += 2;
  else if (b[p] === 0x72) p += 5;
  if (b[p] === 0x28) p++;
  if (b[p] === 0x8c && p + 2 + b[p + 1]! <= b.length) return { protocol, firstKey: b.toString('utf8', p + 2, p + 2 + b[p + 1]!) };
  if (b[p] === 0x58 && p + 5 <= b.length) {
    const n = b.readUInt32LE(p + 1);
    if (p + 5 + n <= b.length) return { protocol, firstKey: b.toString('utf8', p + 5, p + 5 + n) };
  }
  return { protocol };
}

/**
 * Largest pickle read (its content, after gunzip): it is read whole and the values it holds must fit in memory beside
 * it. A gzip pickle is held to the smaller cap on what gzip may inflate to (files.ts).
 */
export const MAX_PICKLE_BYTES = 512 * 2 ** 20;

/**
 * Reads a pickle file (gzip or not) whole and parses it. `progress(done)` counts in bytes of its content (inflated for
 * gzip, as fileSize() gives the total): reading it takes the first half, parsing the second, so `done` reaches the
 * content's size at the end.
 * @throws UnsafePickleError for an opcode or name that would run code or build an object.
 * @throws BadInputError for an unreadable, truncated, malformed or too large pickle.
 */
export async function readPickleFile(file: string, options: { progress?: (done: number) => void; exactInts?: boolean } = {}): Promise<PickleValue> {
  const size = fileSize(file);
  const gzip = isGzipFile(file);
  const cap = gzip ? Math.min(MAX_PICKLE_BYTES, maxInflatedBytes()) : MAX_PICKLE_BYTES;
  if (!gzip && size > cap) throw tooLarge(file, cap);
  const input = openInput(file);
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const c of input) {
      n += (c as Buffer).length;
      if (n > cap) throw tooLarge(file, cap);
      chunks.push(c as Buffer);
      options.progress?.((n / 2) * (size / Math.max(size, n)));
    }
  } catch (e) {
    throw readFailure(e, file);
  } finally {
    input.destroy();
  }
  const buf = Buffer.concat(chunks, n);
  chunks.length = 0;
  return parsePickle(buf, {
    file,
    exactInts: options.exactInts,
    progress: (offset) => options.progress?.(size / 2 + (size / 2) * (offset / Math.max(1, buf.length))),
  });
}

function tooLarge(file: string, cap: number): BadInputError {
  return new BadInputError(
    `the pickle holds more than ${Math.round(cap / 2 ** 20)} MiB: too large to read whole. Write the snapshot as JSON instead (json.dump(torch.cuda.memory._snapshot(), f)): JSON is read as a stream`,
    file,
  );
}

/** Deepest nesting walked: a snapshot's values sit a few levels down. */
const MAX_WALK_DEPTH = 64;

/**
 * Walks a value read from a pickle as walkJson walks a document: `onValue(path, value)` for every value whose path
 * `select` accepts (handed over whole, not walked further). A pickle can share one container in many places (the
 * memo) or put a container inside itself; the walk refuses a cycle, and a sharing so wide that the walk would visit
 * more than `maxVisits` values (a reference bomb), so that it always ends.
 * @throws BadInputError for a cycle or a reference bomb.
 */
export function walkPickle(
  root: PickleValue,
  select: (path: readonly (string | number)[]) => boolean,
  onValue: (path: readonly (string | number)[], value: PickleValue) => void,
  options: { file?: string; maxVisits?: number } = {},
): void {
  const maxVisits = options.maxVisits ?? 50_000_000;
  let visits = 0;
  const path: Array<string | number> = [];
  const open = new Set<object>();
  const visit = (v: PickleValue): void => {
    if (++visits > maxVisits)
      throw new BadInputError(`the pickle shares its containers so widely that reading it would take over ${maxVisits} steps: not a snapshot`, options.file);
    if (path.length > 0 && select(path)) return onValue(path, v);
    if (v === null || typeof v !== 'object' || v instanceof Uint8Array) return;
    if (path.length >= MAX_WALK_DEPTH)
      throw new BadInputError(`the pickle nests containers deeper than ${MAX_WALK_DEPTH} levels: not a snapshot`, options.file);
    if (open.has(v)) throw new BadInputError(`the pickle puts a container inside itself (at ${path.join('.')}): not a snapshot`, options.file);
    open.add(v);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        path.push(i);
        visit(v[i]!);
        path.pop();
      }
    } else {
      for (const k of Object.keys(v)) {
        path.push(k);
        visit(v[k]!);
        path.pop();
      }
    }
    open.delete(v);
  };
  visit(root);
}
