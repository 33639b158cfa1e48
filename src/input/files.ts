/**
 * Opening untrusted input files: gzip is recognised by its magic bytes, not by the name, and the first bytes can be
 * sniffed (decompressed when gzip) to recognise a format without reading the whole file. What a gzip file inflates
 * to is capped (a few MB can hold gigabytes of valid events), and a file's size for progress is its content's.
 */
import { accessSync, closeSync, constants, createReadStream, openSync, readSync, statSync, type Stats } from 'node:fs';
import { createGunzip, gunzipSync } from 'node:zlib';
import { Transform, type Readable } from 'node:stream';
import { BadInputError } from '../errors.js';
import { fsReason } from './fs-errors.js';

/** The environment variable that raises (or lowers) the cap on what one gzip file inflates to, in bytes. */
export const MAX_INFLATED_ENV = 'GPUMEM_MAX_INFLATED_BYTES';
/**
 * The most bytes one gzip input may inflate to by default: 2.5x the largest real trace or snapshot gpumem was checked
 * on (138 MB of JSON from 3 MB), and what is read in well under 10 s. Traces published gzip run 13-47x their size.
 */
export const MAX_INFLATED_BYTES = 256 * 2 ** 20;

/** The cap on inflated bytes in force: GPUMEM_MAX_INFLATED_BYTES when it is a whole number of bytes, else `fallback`. */
export function maxInflatedBytes(fallback = MAX_INFLATED_BYTES): number {
  const v = Number(process.env[MAX_INFLATED_ENV]);
  return Number.isSafeInteger(v) && v > 0 ? v : fallback;
}

/** The refusal of a gzip file that inflates past the cap. */
export function inflatedTooLarge(file: string, cap: number): BadInputError {
  return new BadInputError(
    `the gzip data inflates to more than ${Math.round(cap / 2 ** 20)} MiB (a compression bomb, or a trace larger than gpumem reads compressed): decompress it first (gunzip), or raise ${MAX_INFLATED_ENV}`,
    file,
  );
}

/** A pass-through that counts bytes and fails the stream past `cap`. */
function capped(file: string, cap: number): Transform {
  let n = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      n += chunk.length;
      if (n > cap) done(inflatedTooLarge(file, cap));
      else done(null, chunk);
    },
  });
}

/**
 * Checks that `file` is a regular file that can be read, and answers its size (0 for an empty one: the caller says
 * whether that is an error). A folder, a pipe, a device such as /dev/zero or a socket is refused by what it is, and a
 * path that cannot be read by why, in words.
 * @throws BadInputError naming the file.
 */
export function inputFileSize(file: string): number {
  let st: Stats;
  try {
    st = statSync(file);
    accessSync(file, constants.R_OK);
  } catch (e) {
    throw new BadInputError(`cannot read it (${fsReason(e)})`, file);
  }
  if (st.isDirectory()) throw new BadInputError('it is a folder, not a file', file);
  if (!st.isFile()) throw new BadInputError('not a regular file (a pipe, a device or a socket): give a file', file);
  return st.size;
}

/**
 * The refusal of a read that failed part way: the file system's reason in words, a corrupt or cut gzip stream by
 * name, anything else with its message.
 */
export function readFailure(e: unknown, file: string): BadInputError {
  if (e instanceof BadInputError) return e;
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string' && code.startsWith('Z_')) return new BadInputError('the gzip data is corrupt or cut short', file, { cause: e });
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return new BadInputError(`cannot read it (${fsReason(e)})`, file, { cause: e });
  return new BadInputError(`cannot read it: ${e instanceof Error ? e.message : String(e)} (truncated or corrupt?)`, file, { cause: e });
}

/** The first `n` bytes of a file (fewer when it is shorter). */
export function headBytes(file: string, n = 4096): Buffer {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(n);
    return b.subarray(0, readSync(fd, b, 0, n, 0));
  } finally {
    closeSync(fd);
  }
}

/** True when the file starts with the gzip magic bytes. */
export function isGzipFile(file: string): boolean {
  const h = headBytes(file, 2);
  return h.length === 2 && h[0] === 0x1f && h[1] === 0x8b;
}

/**
 * A readable stream of the file's bytes, gunzipped when gzip, in pieces of at most `pieceBytes`. A gzip file that
 * inflates past {@link maxInflatedBytes} (`inflatedCap` for a reader slower than the JSON ones) fails the stream with
 * a BadInputError saying so.
 */
export function openInput(file: string, pieceBytes = 1 << 20, inflatedCap = MAX_INFLATED_BYTES): Readable {
  const raw = createReadStream(file, { highWaterMark: pieceBytes });
  if (!isGzipFile(file)) return raw;
  const gz = createGunzip({ chunkSize: Math.max(64, Math.min(pieceBytes, 1 << 20)) });
  const cap = capped(file, maxInflatedBytes(inflatedCap));
  raw.on('error', (e) => gz.destroy(e));
  gz.on('error', (e) => cap.destroy(e));
  cap.on('error', () => raw.destroy());
  return raw.pipe(gz).pipe(cap);
}

/**
 * The first bytes of the file's content (decompressed when gzip; a truncated gzip still gives what it has), for
 * binary formats such as a pickle.
 * @throws BadInputError when the file cannot be read or is empty.
 */
export function sniffBytes(file: string, n = 8192): Buffer {
  if (inputFileSize(file) === 0) throw new BadInputError('the file is empty', file);
  const head = headBytes(file, isGzipFile(file) ? 65536 : n);
  if (!(head[0] === 0x1f && head[1] === 0x8b)) return head;
  try {
    return gunzipSync(head, { finishFlush: 2 /* Z_SYNC_FLUSH: accept a cut stream */ }).subarray(0, n);
  } catch {
    throw new BadInputError('the gzip data is corrupt', file);
  }
}

/**
 * The first bytes of the file's content as text (decompressed when gzip; a truncated gzip still gives what it has).
 * @throws BadInputError when the file cannot be read, is not a regular file, or is empty.
 */
export function sniffText(file: string, n = 8192): string {
  return sniffBytes(file, n).toString('utf8');
}

/**
 * The size of the file's content in bytes, for progress: for gzip, what its trailer says it inflates to (ISIZE, the
 * size modulo 2^32, so a guess past 4 GiB; at least the compressed size), else the file's size.
 * @throws BadInputError when the file cannot be read.
 */
export function fileSize(file: string): number {
  const size = inputFileSize(file);
  if (size < 18 || !isGzipFile(file)) return size;
  const fd = openSync(file, 'r');
  try {
    const tail = Buffer.alloc(4);
    readSync(fd, tail, 0, 4, size - 4);
    return Math.max(size, tail.readUInt32LE(0));
  } finally {
    closeSync(fd);
  }
}
