/**
 * The file side of `uploadFile` / `downloadFile`: a path, a FileHandle or a descriptor, opened without ever blocking
 * (a FIFO would block an open for reading until a writer came), checked before anything is read (a regular file, the
 * range inside it), and the way it is read chosen with the reason written down:
 *
 * - `direct`: O_DIRECT, the page cache bypassed, straight into the page-aligned pinned ring. Chosen by `auto` when
 *   most of the range is not in the page cache (mincore over a mapping of it), where it saves the kernel's copy.
 * - `buffered`: pread through the page cache. Chosen by `auto` when the range is mostly cached (reading the cache is
 *   a memory copy; O_DIRECT would read the disk again), and where O_DIRECT is refused (tmpfs and other file systems
 *   answer EINVAL) or cannot be used (the host backend reads through Node's fs, into memory that is not aligned).
 *
 * Descriptors gpumem opens are closed when the transfer settles, whatever happened; a caller's own descriptor or
 * FileHandle is never closed (an O_DIRECT twin of it is opened through /proc/self/fd and closed).
 */
import { closeSync, constants, fstatSync, openSync, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { checkRange, checkSize } from '../memory/validate.js';
import { describeValue } from '../memory/describe.js';

/** What `uploadFile` and `downloadFile` take as the file. */
export type FileRef = string | FileHandle | number;

/** How a file transfer asks to read or write. */
export type FilePathChoice = 'auto' | 'direct' | 'buffered' | 'cufile';

/** An open file, checked, with the way it will be read. */
export interface OpenedFile {
  fd: number;
  /** Bytes of the file when it was checked. */
  size: number;
  /** Identity of the file (device and inode), for ordering transfers that touch the same file. */
  key: string;
  /** The path given, or /proc/self/fd/N for a descriptor. */
  name: string;
  direct: boolean;
  /** Why the way asked (or O_DIRECT under auto) was not taken, when it was not. */
  fallback: string | undefined;
  /** Closes what gpumem opened (never the caller's descriptor). Idempotent. */
  close(): void;
}

/** A range of a file, checked against its size. */
export interface FileRange {
  offset: number;
  bytes: number;
}

const O_DIRECT = constants.O_DIRECT ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;

/** Fraction of a range's pages that must be cached for `auto` to read through the page cache. */
const CACHED_ENOUGH = 0.5;

/** The descriptor of a FileRef, and whether gpumem opened it. @throws InvalidArgumentError, GpuError IO_ERROR */
function descriptor(file: FileRef, write: boolean, what: string): { fd: number; owned: boolean; name: string } {
  if (typeof file === 'string') {
    if (file.length === 0) throw new InvalidArgumentError(`${what}: the path is empty`);
    const flags = write ? constants.O_WRONLY | constants.O_CREAT : constants.O_RDONLY;
    try {
      return { fd: openSync(file, flags | O_NONBLOCK, 0o644), owned: true, name: file };
    } catch (e) {
      throw ioError(`${what}: cannot open ${file}`, e);
    }
  }
  if (typeof file === 'number') {
    if (!Number.isInteger(file) || file < 0) throw new InvalidArgumentError(`${what}: ${file} is not a file descriptor`);
    return { fd: file, owned: false, name: `/proc/self/fd/${file}` };
  }
  const fd = (file as { fd?: unknown } | null)?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    throw new InvalidArgumentError(
      `${what}: expected a path, a FileHandle or a file descriptor, got ${describeValue(file)}${typeof fd === 'number' ? ' (closed)' : ''}`,
    );
  }
  return { fd, owned: false, name: `/proc/self/fd/${fd}` };
}

/**
 * Opens (or adopts) a file to read `range` from and decides the way to read it.
 * @throws InvalidArgumentError for a bad argument or a file that is not a regular file (a FIFO, a directory);
 *   OUT_OF_BOUNDS for a range past the end of the file; GpuError IO_ERROR when it cannot be opened or stat'ed.
 */
export function openForRead(
  file: FileRef,
  options: {
    offset?: number | undefined;
    bytes?: number | undefined;
    path: FilePathChoice;
    /** Why O_DIRECT cannot be used here at all (undefined: it can be tried). */
    noDirect: string | undefined;
    /** The share of the range's pages in the page cache, where it can be told. */
    cached?: ((fd: number, r: FileRange) => number | undefined) | undefined;
  },
  what = 'uploadFile',
): { file: OpenedFile; range: FileRange } {
  const d = descriptor(file, false, what);
  let closed = false;
  const extra: number[] = [];
  const close = (): void => {
    if (closed) return;
    closed = true;
    for (const fd of extra) safeClose(fd);
    if (d.owned) safeClose(d.fd);
  };
  try {
    const st = statOf(d.fd, what, d.name);
    const range = checkFileRange(options.offset, options.bytes, st.size, what, d.name);
    let fd = d.fd;
    let direct = false;
    let fallback: string | undefined;
    if (options.path === 'direct' || options.path === 'auto') {
      let wanted = options.path === 'direct';
      if (options.noDirect !== undefined) {
        if (wanted) fallback = options.noDirect;
        wanted = false;
      } else if (options.path === 'auto') {
        // Mostly cached: reading the cache is a memory copy, where O_DIRECT would read the disk again.
        const share = options.cached?.(d.fd, range);
        wanted = share !== undefined && share < CACHED_ENOUGH;
      }
      if (wanted) {
        try {
          // The same inode through /proc (a path could have been replaced since the check), without O_NONBLOCK:
          // cuFile refuses descriptors that carry it (CU_FILE_INVALID_FILE_OPEN_FLAG, seen on an H200 machine).
          fd = openSync(`/proc/self/fd/${d.fd}`, constants.O_RDONLY | O_DIRECT);
          extra.push(fd);
          direct = true;
        } catch (e) {
          fd = d.fd;
          fallback = `the file system refused O_DIRECT (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
        }
      }
    }
    return { file: { fd, size: st.size, key: `${st.dev}:${st.ino}`, name: d.name, direct, fallback, close }, range };
  } catch (e) {
    close();
    throw e;
  }
}

/**
 * Opens (or adopts) a file to write `bytes` into at `offset` (created if a path names none; never truncated).
 * @throws InvalidArgumentError, GpuError IO_ERROR
 */
export function openForWrite(file: FileRef, offset: number | undefined, what = 'downloadFile'): { file: OpenedFile; offset: number } {
  const at = checkSize(offset ?? 0, `${what} offset`, { allowZero: true });
  const d = descriptor(file, true, what);
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    if (d.owned) safeClose(d.fd);
  };
  try {
    const st = statOf(d.fd, what, d.name);
    return { file: { fd: d.fd, size: st.size, key: `${st.dev}:${st.ino}`, name: d.name, direct: false, fallback: undefined, close }, offset: at };
  } catch (e) {
    close();
    throw e;
  }
}

function statOf(fd: number, what: string, name: string): Stats {
  let st: Stats;
  try {
    st = fstatSync(fd);
  } catch (e) {
    throw ioError(`${what}: cannot stat ${name}`, e);
  }
  if (!st.isFile()) {
    const kind = st.isFIFO()
      ? 'a FIFO'
      : st.isDirectory()
        ? 'a directory'
        : st.isSocket()
          ? 'a socket'
          : st.isCharacterDevice()
            ? 'a character device'
            : 'not a regular file';
    throw new InvalidArgumentError(`${what}: ${name} is ${kind}; file transfers read and write regular files at offsets`);
  }
  return st;
}

/** Checks `[offset, offset + bytes)` against a file of `size` bytes. */
export function checkFileRange(offset: number | undefined, bytes: number | undefined, size: number, what: string, name: string): FileRange {
  const o = checkSize(offset ?? 0, `${what} offset`, { allowZero: true });
  if (o > size) throw new InvalidArgumentError(`${what}: offset ${o} is past the end of ${name} (${size} bytes)`, ErrorCode.OUT_OF_BOUNDS);
  const n = bytes === undefined ? size - o : checkSize(bytes, `${what} bytes`);
  if (n === 0) throw new InvalidArgumentError(`${what}: nothing to read (${name} has ${size} bytes, the offset is ${o})`, ErrorCode.INVALID_SIZE);
  if (o + n > size) {
    throw new InvalidArgumentError(`${what}: ${name} is ${size} bytes, shorter than the ${n} bytes asked from offset ${o}`, ErrorCode.OUT_OF_BOUNDS);
  }
  checkRange(o, n, size, what);
  return { offset: o, bytes: n };
}

function safeClose(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed by someone else: nothing leaks
  }
}

/** A failed open or stat as a typed error carrying the errno's name (ENOENT: the file is not there, or vanished). */
export function ioError(message: string, e: unknown): GpuError {
  const err = e as NodeJS.ErrnoException;
  const name = err?.code;
  if (name === 'EISDIR') return new InvalidArgumentError(`${message}: it is a directory`, ErrorCode.INVALID_ARGUMENT, { statusName: name, cause: e });
  return new GpuError(ErrorCode.IO_ERROR, `${message}: ${name === 'ENOENT' ? 'no such file (ENOENT)' : (name ?? String(e))}`, {
    status: typeof err?.errno === 'number' ? -err.errno : undefined,
    statusName: name,
    cause: e,
  });
}
