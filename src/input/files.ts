/**
 * Opening untrusted input files: gzip is recognised by its magic bytes, not by the name, and the first bytes can be
 * sniffed (decompressed when gzip) to recognise a format without reading the whole file.
 */
import { createReadStream, openSync, readSync, closeSync, statSync } from 'node:fs';
import { createGunzip, gunzipSync } from 'node:zlib';
import type { Readable } from 'node:stream';
import { BadInputError } from '../errors.js';

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

/** A readable stream of the file's bytes, gunzipped when gzip, in pieces of at most `pieceBytes`. */
export function openInput(file: string, pieceBytes = 1 << 20): Readable {
  const raw = createReadStream(file, { highWaterMark: pieceBytes });
  if (!isGzipFile(file)) return raw;
  const gz = createGunzip({ chunkSize: Math.max(64, Math.min(pieceBytes, 1 << 20)) });
  raw.on('error', (e) => gz.destroy(e));
  return raw.pipe(gz);
}

/**
 * The first bytes of the file's content (decompressed when gzip; a truncated gzip still gives what it has), for
 * binary formats such as a pickle.
 * @throws BadInputError when the file cannot be read or is empty.
 */
export function sniffBytes(file: string, n = 8192): Buffer {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    throw new BadInputError('cannot read the file (does it exist?)', file);
  }
  if (size === 0) throw new BadInputError('the file is empty', file);
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
 * @throws BadInputError when the file cannot be read or is empty.
 */
export function sniffText(file: string, n = 8192): string {
  return sniffBytes(file, n).toString('utf8');
}

/** The file's size in bytes (compressed size for gzip), for progress. */
export function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    throw new BadInputError('cannot read the file (does it exist?)', file);
  }
}
