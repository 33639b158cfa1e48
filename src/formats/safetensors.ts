/**
 * The safetensors format, read and written in TypeScript with no runtime: the 8-byte little-endian header length,
 * the JSON header (dtype, shape, data_offsets per tensor, `__metadata__` of strings) and the byte buffer after it.
 *
 * The rules are those of the format's README and of its reference implementation (the Rust crate `safetensors`,
 * huggingface/safetensors at commit 24b0b28, safetensors/src/tensor.rs), which the Python package and
 * `safetensors.torch.load_file` run:
 * - the header length is at most 100,000,000 bytes and the header lies inside the file;
 * - the header is UTF-8 JSON, an object; JSON whitespace may pad it before and after (writers pad it so that the
 *   byte buffer starts aligned);
 * - keys are unique (the README disallows duplicates; the reference keeps the last silently: refused here, even
 *   when the repeat holds the same value);
 * - each tensor has a dtype the format defines, a shape of non-negative integers and `data_offsets` [begin, end)
 *   relative to the byte buffer; ordered by offset, each tensor starts where the one before it ends (no overlap, no
 *   hole: the buffer is entirely indexed, so a file cannot also be another format), and elements x bits / 8 is
 *   exactly end - begin (sub-byte dtypes must end on a byte boundary);
 * - the file ends where the last tensor ends: no byte more, no byte less.
 * Fields of a tensor entry other than those three are ignored, as the reference ignores them.
 *
 * The writer follows the reference's `serialize`: tensors sorted by dtype, widest alignment first (the order of the
 * reference's Dtype enum, descending), then by name (UTF-8 bytes); `__metadata__` first; compact JSON; the header
 * padded with spaces to a multiple of 8 bytes.
 */
import { BadInputError, ErrorCode, InvalidArgumentError } from '../errors.js';
import { JsonNumber, JsonSyntaxError, parseStrictJson } from '../input/json-strict.js';
import { quoteValue } from '../input/quote.js';

/** Every dtype the format defines, in the order of the reference's enum (the writer sorts by it, descending). */
export const SAFETENSORS_DTYPES = [
  'BOOL',
  'F4',
  'F6_E2M3',
  'F6_E3M2',
  'U8',
  'I8',
  'F8_E5M2',
  'F8_E4M3',
  'F8_E8M0',
  'F8_E4M3FNUZ',
  'F8_E5M2FNUZ',
  'I16',
  'U16',
  'F16',
  'BF16',
  'I32',
  'U32',
  'F32',
  'C64',
  'F64',
  'I64',
  'U64',
] as const;
export type SafetensorsDtype = (typeof SAFETENSORS_DTYPES)[number];

const BITS: Readonly<Record<SafetensorsDtype, number>> = {
  BOOL: 8,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
  U8: 8,
  I8: 8,
  F8_E5M2: 8,
  F8_E4M3: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  C64: 64,
  F64: 64,
  I64: 64,
  U64: 64,
};
const RANK = new Map<string, number>(SAFETENSORS_DTYPES.map((d, i) => [d, i]));

/** The largest header the format accepts, in bytes. */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;
/** Bytes of the little-endian u64 before the header. */
export const SAFETENSORS_PREFIX_BYTES = 8;

/** Which rule a file broke. Stable: tests and callers may match on it. */
export type SafetensorsProblem =
  | 'header-too-small'
  | 'header-too-large'
  | 'header-length'
  | 'header-utf8'
  | 'header-json'
  | 'duplicate-key'
  | 'bad-entry'
  | 'unknown-dtype'
  | 'metadata'
  | 'invalid-offset'
  | 'misaligned'
  | 'size-mismatch'
  | 'incomplete-buffer'
  | 'not-a-file'
  | 'read-failed'
  | 'write-failed'
  | 'truncated'
  | 'bad-index'
  | 'missing-shard'
  | 'missing-tensor';

/** A safetensors file (or shard index) that breaks the format's rules or cannot be read. Code GPUMEM_BAD_INPUT. */
export class SafetensorsError extends BadInputError {
  constructor(
    readonly problem: SafetensorsProblem,
    message: string,
    file?: string,
    cause?: unknown,
  ) {
    super(message, file, cause === undefined ? {} : { cause });
    this.name = 'SafetensorsError';
  }
}

/** One tensor of a header. */
export interface SafetensorsTensorInfo {
  readonly name: string;
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
  /** Offsets in the byte buffer (after the header): [begin, end). */
  readonly begin: number;
  readonly end: number;
  readonly bytes: number;
}

/** A parsed and checked header. */
export interface SafetensorsHeader {
  /** N: bytes of the JSON header, padding included. */
  readonly headerBytes: number;
  /** Where the byte buffer starts in the file: 8 + N. */
  readonly dataOffset: number;
  readonly dataBytes: number;
  /** The file's size as the header describes it. */
  readonly fileBytes: number;
  /** Tensors in the order of their bytes in the file. */
  readonly tensors: readonly SafetensorsTensorInfo[];
  readonly byName: ReadonlyMap<string, SafetensorsTensorInfo>;
  /** `__metadata__`, in the file's key order; undefined when the file has none. */
  readonly metadata: ReadonlyMap<string, string> | undefined;
}

/** True when `s` names a dtype of the format. */
export function isSafetensorsDtype(s: unknown): s is SafetensorsDtype {
  return typeof s === 'string' && RANK.has(s);
}

/** Bits of one element of `dtype`. */
export function dtypeBits(dtype: SafetensorsDtype): number {
  return BITS[dtype];
}

/**
 * Bytes of a tensor of `dtype` and `shape`, or the reason it has none: 'misaligned' when a sub-byte dtype does not
 * end on a byte boundary, 'too-large' beyond 2^53 - 1 bytes.
 */
export function tensorByteSize(dtype: SafetensorsDtype, shape: readonly number[]): number | 'misaligned' | 'too-large' {
  let elements = 1n;
  for (const d of shape) elements *= BigInt(d);
  const bits = elements * BigInt(BITS[dtype]);
  if (bits % 8n !== 0n) return 'misaligned';
  const bytes = bits / 8n;
  return bytes > BigInt(Number.MAX_SAFE_INTEGER) ? 'too-large' : Number(bytes);
}

/**
 * Reads the header length N from the first 8 bytes of a file of `fileBytes` bytes.
 * @throws SafetensorsError header-too-small (under 8 bytes), header-too-large (N above 100,000,000), header-length
 *   (the header would end past the end of the file).
 */
export function readHeaderLength(prefix: Uint8Array, fileBytes: number, file?: string): number {
  if (prefix.byteLength < SAFETENSORS_PREFIX_BYTES || fileBytes < SAFETENSORS_PREFIX_BYTES) {
    throw new SafetensorsError('header-too-small', `the file is ${fileBytes} bytes: too short for the 8-byte header length`, file);
  }
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) {
    throw new SafetensorsError('header-too-large', `the header length is ${n} bytes; the format allows at most ${SAFETENSORS_MAX_HEADER_BYTES}`, file);
  }
  const length = Number(n);
  if (SAFETENSORS_PREFIX_BYTES + length > fileBytes) {
    throw new SafetensorsError('header-length', `the header length ${length} points past the end of the ${fileBytes}-byte file`, file);
  }
  return length;
}

const INTEGER = /^(0|[1-9][0-9]*)$/;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** True for a JSON object (not an array, not null). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A non-negative integer literal: its value, or undefined (offsets and sizes are u64, kept as their text). */
function natural(v: unknown): bigint | undefined {
  return v instanceof JsonNumber && v.text.length <= 20 && INTEGER.test(v.text) ? BigInt(v.text) : undefined;
}

/** Beyond this many elements no tensor fits in a file (2^64 bytes, 8 elements per byte): the product stops there. */
const ELEMENTS_CAP = 2n ** 67n;

/** The product of the dimensions, or undefined beyond ELEMENTS_CAP (a zero anywhere makes it 0). */
function elementCount(dims: readonly bigint[]): bigint | undefined {
  if (dims.includes(0n)) return 0n;
  let n = 1n;
  for (const d of dims) {
    n *= d;
    if (n > ELEMENTS_CAP) return undefined;
  }
  return n;
}

/** A shape for a message: its first dimensions, and how many there are when there are many. */
function shapeText(dims: readonly bigint[]): string {
  return dims.length <= 8 ? `[${dims.join(', ')}]` : `[${dims.slice(0, 8).join(', ')}, ...] (${dims.length} dimensions)`;
}

/**
 * The longest tensor name or metadata key read, in characters. The format sets none; real names are under a few
 * hundred characters, and a header of one 99 MB name is no checkpoint (printing it alone takes seconds and GBs).
 */
export const SAFETENSORS_MAX_NAME = 65_536;

/** The deepest nesting a header needs: the root, a tensor, its shape. Deeper is refused before it is parsed. */
const HEADER_DEPTH = 4;

/**
 * Parses and checks the JSON header (the N bytes after the length) of a file of `fileBytes` bytes.
 * @throws SafetensorsError naming the rule broken (see the module comment).
 */
export function parseHeader(json: Uint8Array, fileBytes: number, file?: string): SafetensorsHeader {
  const fail = (problem: SafetensorsProblem, message: string, cause?: unknown): never => {
    throw new SafetensorsError(problem, message, file, cause);
  };
  let text = '';
  try {
    text = utf8.decode(json);
  } catch (e) {
    fail('header-utf8', 'the header is not valid UTF-8', e);
  }
  let root: unknown;
  try {
    root = parseStrictJson(text, { maxDepth: HEADER_DEPTH });
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    if (e.duplicateKey !== undefined) fail('duplicate-key', `the header repeats a key: ${e.message}`, e);
    fail('header-json', `the header is not JSON: ${e.message}`, e);
  }
  if (!isPlainObject(root)) return fail('header-json', 'the header is not a JSON object');
  let metadata: Map<string, string> | undefined;
  const tensors: SafetensorsTensorInfo[] = [];
  // data_offsets count from the end of the header
  const room = BigInt(fileBytes - SAFETENSORS_PREFIX_BYTES - json.byteLength);
  for (const [name, entry] of Object.entries(root)) {
    const tensor = `tensor ${quoteValue(name)}`;
    if (name.length > SAFETENSORS_MAX_NAME) fail('bad-entry', `${tensor}: a name of ${name.length} characters; at most ${SAFETENSORS_MAX_NAME} are read`);
    if (name === '__metadata__') {
      if (entry === null) continue;
      if (!isPlainObject(entry)) fail('metadata', '__metadata__ must be an object of strings');
      metadata = new Map();
      for (const [k, v] of Object.entries(entry as Record<string, unknown>)) {
        if (typeof v !== 'string') fail('metadata', `__metadata__ must hold only strings; ${quoteValue(k)} is not one`);
        if (k.length > SAFETENSORS_MAX_NAME) fail('metadata', `__metadata__ key ${quoteValue(k)}: at most ${SAFETENSORS_MAX_NAME} characters are read`);
        metadata.set(k, v as string);
      }
      continue;
    }
    if (!isPlainObject(entry)) fail('bad-entry', `${tensor}: expected an object with dtype, shape and data_offsets`);
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    if (typeof dtype !== 'string') fail('bad-entry', `${tensor}: dtype must be a string`);
    if (!isSafetensorsDtype(dtype))
      fail('unknown-dtype', `${tensor}: unknown dtype ${quoteValue(dtype as string, 40)} (the format defines ${SAFETENSORS_DTYPES.join(', ')})`);
    if (!Array.isArray(shape)) fail('bad-entry', `${tensor}: shape must be an array of non-negative integers`);
    const dims = (shape as unknown[]).map(natural);
    if (dims.some((d) => d === undefined)) fail('bad-entry', `${tensor}: shape must be an array of non-negative integers`);
    if (!Array.isArray(offsets) || offsets.length !== 2) fail('bad-entry', `${tensor}: data_offsets must be [begin, end]`);
    const [b, e] = (offsets as unknown[]).map(natural);
    if (b === undefined || e === undefined) fail('bad-entry', `${tensor}: data_offsets must be two non-negative integers`);
    if (e! < b!) fail('invalid-offset', `${tensor}: data_offsets end ${e} is before begin ${b}`);
    if (e! > room) {
      fail(
        'incomplete-buffer',
        `${tensor}: data_offsets [${b}, ${e}] reach past the end of the file (${room} bytes after the header): truncated, or the header is wrong`,
      );
    }
    const elements = elementCount(dims as bigint[]);
    if (elements === undefined)
      fail('size-mismatch', `${tensor}: shape ${shapeText(dims as bigint[])} has more elements than any file holds bytes; data_offsets hold ${e! - b!}`);
    const bits = elements! * BigInt(BITS[dtype as SafetensorsDtype]);
    if (bits % 8n !== 0n) fail('misaligned', `${tensor}: ${elements} elements of ${dtype} do not end on a byte boundary`);
    if (bits / 8n !== e! - b!) {
      fail('size-mismatch', `${tensor}: shape ${shapeText(dims as bigint[])} of ${dtype} is ${bits / 8n} bytes, data_offsets [${b}, ${e}] hold ${e! - b!}`);
    }
    if (dims.some((d) => d! > BigInt(Number.MAX_SAFE_INTEGER))) fail('bad-entry', `${tensor}: a dimension above 2^53 - 1`);
    tensors.push({ name, dtype: dtype as SafetensorsDtype, shape: dims.map(Number), begin: Number(b), end: Number(e), bytes: Number(e! - b!) });
  }
  tensors.sort((x, y) => x.begin - y.begin || x.end - y.end);
  let at = 0;
  for (const t of tensors) {
    if (t.begin !== at) {
      fail(
        'invalid-offset',
        t.begin < at
          ? `tensor ${quoteValue(t.name)}: data_offsets [${t.begin}, ${t.end}] overlap the tensor before it, which ends at ${at}`
          : `tensor ${quoteValue(t.name)}: data_offsets [${t.begin}, ${t.end}] leave a hole after byte ${at} (the byte buffer must be entirely indexed)`,
      );
    }
    at = t.end;
  }
  const dataOffset = SAFETENSORS_PREFIX_BYTES + json.byteLength;
  if (dataOffset + at !== fileBytes) {
    fail(
      'incomplete-buffer',
      dataOffset + at > fileBytes
        ? `the header describes ${dataOffset + at} bytes, the file has ${fileBytes}: it is truncated`
        : `the file has ${fileBytes - dataOffset - at} bytes after the last tensor (the byte buffer must be entirely indexed)`,
    );
  }
  return {
    headerBytes: json.byteLength,
    dataOffset,
    dataBytes: at,
    fileBytes,
    tensors,
    byName: new Map(tensors.map((t) => [t.name, t])),
    metadata,
  };
}

/**
 * Parses a whole file held in memory.
 * @returns the header and each tensor's bytes (views into `bytes`, no copy).
 * @throws SafetensorsError
 */
export function parseSafetensors(bytes: Uint8Array, file?: string): { header: SafetensorsHeader; data: (name: string) => Uint8Array } {
  const n = readHeaderLength(bytes.subarray(0, SAFETENSORS_PREFIX_BYTES), bytes.byteLength, file);
  const header = parseHeader(bytes.subarray(SAFETENSORS_PREFIX_BYTES, SAFETENSORS_PREFIX_BYTES + n), bytes.byteLength, file);
  return {
    header,
    data: (name) => {
      const t = header.byName.get(name);
      if (!t) throw new SafetensorsError('missing-tensor', `no tensor ${quoteValue(name)}`, file);
      return bytes.subarray(header.dataOffset + t.begin, header.dataOffset + t.end);
    },
  };
}

/** What the writer needs to know of a tensor. */
export interface SafetensorsEntry {
  readonly name: string;
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
}

/** The writer's plan: the first bytes of the file, and where each tensor's bytes go. */
export interface SafetensorsLayout {
  /** The 8-byte length and the padded header: the file's first `dataOffset` bytes. */
  readonly prefix: Uint8Array;
  readonly dataOffset: number;
  readonly dataBytes: number;
  readonly fileBytes: number;
  /** Tensors in the order their bytes follow the header, with their offsets; `index` is the entry's position given. */
  readonly tensors: ReadonlyArray<SafetensorsTensorInfo & { readonly index: number }>;
}

const utf8Bytes = (s: string): Buffer => Buffer.from(s, 'utf8');
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function tooLarge(bytes: number): never {
  throw new InvalidArgumentError(
    `the header would be at least ${bytes} bytes; the format allows at most ${SAFETENSORS_MAX_HEADER_BYTES}`,
    ErrorCode.INVALID_SIZE,
  );
}

/**
 * Lays out a file as the reference writer does (see the module comment).
 * @throws InvalidArgumentError for a duplicate or reserved name, a name or metadata that is not valid Unicode, an
 *   unknown dtype, a bad shape, a sub-byte tensor that does not end on a byte boundary; INVALID_SIZE for a header
 *   above the format's limit.
 */
export function layoutSafetensors(
  entries: readonly SafetensorsEntry[],
  metadata?: ReadonlyMap<string, string> | Readonly<Record<string, string>>,
): SafetensorsLayout {
  const seen = new Set<string>();
  const sized = entries.map((e, index) => {
    if (typeof e.name !== 'string' || LONE_SURROGATE.test(e.name))
      throw new InvalidArgumentError(`tensor name ${quoteValue(String(e.name))}: expected a string of valid Unicode`);
    if (e.name === '__metadata__') throw new InvalidArgumentError('"__metadata__" is reserved for the metadata; it cannot name a tensor');
    if (seen.has(e.name)) throw new InvalidArgumentError(`tensor ${quoteValue(e.name)} appears twice`);
    seen.add(e.name);
    if (!isSafetensorsDtype(e.dtype))
      throw new InvalidArgumentError(
        `tensor ${quoteValue(e.name)}: unknown dtype ${quoteValue(String(e.dtype), 40)} (the format defines ${SAFETENSORS_DTYPES.join(', ')})`,
      );
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new InvalidArgumentError(`tensor ${quoteValue(e.name)}: shape must be an array of non-negative integers`);
    }
    const bytes = tensorByteSize(e.dtype, e.shape);
    if (bytes === 'misaligned')
      throw new InvalidArgumentError(`tensor ${quoteValue(e.name)}: [${e.shape.join(', ')}] of ${e.dtype} does not end on a byte boundary`);
    if (bytes === 'too-large') throw new InvalidArgumentError(`tensor ${quoteValue(e.name)}: more than 2^53 - 1 bytes`, ErrorCode.INVALID_SIZE);
    return { e, index, bytes, key: utf8Bytes(e.name) };
  });
  sized.sort((x, y) => RANK.get(y.e.dtype)! - RANK.get(x.e.dtype)! || Buffer.compare(x.key, y.key));
  const parts: string[] = [];
  if (metadata !== undefined) {
    const pairs = metadata instanceof Map ? [...metadata] : Object.entries(metadata);
    let least = 0;
    for (const [k, v] of pairs) {
      if (typeof k !== 'string' || typeof v !== 'string') throw new InvalidArgumentError(`metadata ${quoteValue(String(k))}: keys and values must be strings`);
      // A lower bound of the header's size (quotes and colon), so that an oversized one is refused before it is built.
      least += k.length + v.length + 6;
      if (least > SAFETENSORS_MAX_HEADER_BYTES) tooLarge(least);
      if (LONE_SURROGATE.test(k) || LONE_SURROGATE.test(v)) throw new InvalidArgumentError(`metadata ${quoteValue(k)}: keys and values must be valid Unicode`);
    }
    parts.push(`"__metadata__":{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`);
  }
  let at = 0;
  const tensors = sized.map(({ e, index, bytes }) => {
    const t = { name: e.name, dtype: e.dtype, shape: [...e.shape], begin: at, end: at + bytes, bytes, index };
    parts.push(`${JSON.stringify(e.name)}:{"dtype":"${e.dtype}","shape":[${e.shape.join(',')}],"data_offsets":[${t.begin},${t.end}]}`);
    at += bytes;
    return t;
  });
  const json = utf8Bytes(`{${parts.join(',')}}`);
  const n = Math.ceil(json.byteLength / 8) * 8;
  if (n > SAFETENSORS_MAX_HEADER_BYTES) tooLarge(n);
  const prefix = Buffer.alloc(SAFETENSORS_PREFIX_BYTES + n, 0x20);
  prefix.writeBigUInt64LE(BigInt(n), 0);
  json.copy(prefix, SAFETENSORS_PREFIX_BYTES);
  const dataOffset = prefix.byteLength;
  return { prefix, dataOffset, dataBytes: at, fileBytes: dataOffset + at, tensors };
}

/** A tensor held in memory, for {@link serializeSafetensors}. */
export interface SafetensorsHostTensor extends SafetensorsEntry {
  readonly data: Uint8Array;
}

/**
 * A whole file in memory, as the reference's `serialize` writes it.
 * @throws InvalidArgumentError as layoutSafetensors, and INVALID_SIZE when a tensor's data is not its size.
 */
export function serializeSafetensors(
  tensors: readonly SafetensorsHostTensor[],
  metadata?: ReadonlyMap<string, string> | Readonly<Record<string, string>>,
): Uint8Array {
  const layout = layoutSafetensors(tensors, metadata);
  const out = new Uint8Array(layout.fileBytes);
  out.set(layout.prefix, 0);
  for (const t of layout.tensors) {
    const data = tensors[t.index]!.data;
    if (data.byteLength !== t.bytes)
      throw new InvalidArgumentError(`tensor ${quoteValue(t.name)}: ${data.byteLength} bytes of data for ${t.bytes} bytes of tensor`, ErrorCode.INVALID_SIZE);
    out.set(data, layout.dataOffset + t.begin);
  }
  return out;
}
