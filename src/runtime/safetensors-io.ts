/**
 * Moving a byte range of an open file to device memory and back, for the safetensors loader and writer.
 *
 * The loader and writer only call the two function types below. {@link runtimeFileMover} implements them with the
 * runtime's file transfers (`rt.uploadFile` / `rt.downloadFile`: pread straight into the stager's pinned ring on its
 * copier threads, O_DIRECT or cuFile where they work); {@link PinnedFileMover}, a few pinned slots read into by
 * libuv's threads while `rt.upload` copies the piece before, remains for callers that pass it as their mover.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { SafetensorsError } from '../formats/safetensors.js';
import type { Allocation, PinnedAllocation } from '../memory/allocation.js';
import type { Runtime } from './runtime.js';

/** How the bytes went: through host memory ('buffered'), with O_DIRECT ('direct'), or by GPUDirect Storage. */
export type FilePath = 'buffered' | 'direct' | 'cufile';

/** A file range and where it goes in (or comes from) device memory. */
export interface FileRange {
  /** Byte offset in the file. */
  offset: number;
  bytes: number;
  /** Byte offset in the device allocation. */
  deviceOffset: number;
  signal?: AbortSignal | undefined;
}

/** Reads `range` of `file` into `dst` at `range.deviceOffset`. Rejects with a GpuError; writes nothing past the range. */
export type FileToDevice = (dst: Allocation, file: FileHandle, range: FileRange) => Promise<{ path: FilePath }>;
/** Writes `range.bytes` of `src` from `range.deviceOffset` to `file` at `range.offset`. */
export type DeviceToFile = (file: FileHandle, src: Allocation, range: FileRange) => Promise<{ path: FilePath }>;

/** Both directions, and what they hold. */
export interface FileMover extends Disposable {
  readonly toDevice: FileToDevice;
  readonly toFile: DeviceToFile;
}

const MiB = 1024 * 1024;

/** Options of {@link PinnedFileMover}. */
export interface PinnedFileMoverOptions {
  /** Bytes of one piece (default 16 MiB; a multiple of 4 KiB). */
  pieceBytes?: number;
  /** Pinned slots, so pieces in flight (default 4). */
  slots?: number;
  /** The largest range it will be asked to move, to size the slots for small files. */
  largestRange?: number;
}

function aborted(): GpuError {
  return new GpuError(ErrorCode.ABORTED, 'the file transfer was aborted');
}

function ioError(problem: 'read-failed' | 'write-failed', what: string, e: unknown): SafetensorsError {
  const code = (e as NodeJS.ErrnoException)?.code ?? (e instanceof Error ? e.message : String(e));
  return new SafetensorsError(problem, `${what} failed (${code})`, undefined, e);
}

/** Reads exactly `buf.byteLength` bytes at `position`, or fails saying where the file ended. */
async function readFully(fh: FileHandle, buf: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < buf.byteLength) {
    let n: number;
    try {
      n = (await fh.read(buf, done, buf.byteLength - done, position + done)).bytesRead;
    } catch (e) {
      throw ioError('read-failed', `reading ${buf.byteLength} bytes at byte ${position}`, e);
    }
    if (n === 0) {
      throw new SafetensorsError(
        'truncated',
        `the file ended at byte ${position + done}, ${buf.byteLength - done} bytes before the data its header describes (was it truncated while being read?)`,
      );
    }
    done += n;
  }
}

/**
 * Writes all of `buf` at `position`.
 * @throws (rejects) SafetensorsError write-failed
 */
async function writeFully(fh: FileHandle, buf: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < buf.byteLength) {
    try {
      done += (await fh.write(buf, done, buf.byteLength - done, position + done)).bytesWritten;
    } catch (e) {
      throw ioError('write-failed', `writing ${buf.byteLength} bytes at byte ${position}`, e);
    }
  }
}

/**
 * File ranges through pinned slots: reads of the next pieces run on libuv's threads while the piece before is
 * copied to the device; the slots are allocated on first use and freed on dispose.
 */
export class PinnedFileMover implements FileMover {
  private ring: PinnedAllocation | undefined;
  private readonly piece: number;
  private readonly slots: number;

  /** @throws InvalidArgumentError for a piece size that is not a positive multiple of 4 KiB, or slots outside 1 to 64 */
  constructor(
    private readonly rt: Runtime,
    options: PinnedFileMoverOptions = {},
  ) {
    const piece = options.pieceBytes ?? 16 * MiB;
    if (!Number.isSafeInteger(piece) || piece <= 0 || piece % 4096 !== 0) {
      throw new InvalidArgumentError(`pieceBytes: a positive multiple of 4096, got ${piece}`, ErrorCode.INVALID_SIZE);
    }
    const slots = options.slots ?? 4;
    if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new InvalidArgumentError(`slots: 1 to 64, got ${slots}`);
    const largest = options.largestRange;
    // A small file gets slots its own size (rounded to 4 KiB), not 64 MiB of pinned memory.
    this.piece = largest !== undefined && largest > 0 ? Math.min(piece, Math.ceil(largest / 4096) * 4096) : piece;
    this.slots = largest !== undefined && largest > 0 ? Math.max(1, Math.min(slots, Math.ceil(largest / this.piece))) : slots;
  }

  private slot(k: number): { offset: number } {
    this.ring ??= this.rt.allocPinned(this.piece * this.slots);
    return { offset: (k % this.slots) * this.piece };
  }

  readonly toDevice: FileToDevice = async (dst, file, range) => {
    const n = Math.ceil(range.bytes / this.piece);
    const size = (k: number): number => Math.min(this.piece, range.bytes - k * this.piece);
    const reads: Array<Promise<void>> = [];
    const post = (k: number): void => {
      const ring = this.ring!;
      const { offset } = this.slot(k);
      const p = readFully(file, ring.view(offset, size(k)), range.offset + k * this.piece);
      p.catch(() => {}); // awaited in order below; an early failure must not surface as unhandled meanwhile
      reads[k] = p;
    };
    this.slot(0);
    try {
      for (let k = 0; k < Math.min(this.slots, n); k++) post(k);
      for (let k = 0; k < n; k++) {
        await reads[k];
        if (range.signal?.aborted) throw aborted();
        await this.rt.upload(dst, this.ring!, {
          srcOffset: this.slot(k).offset,
          bytes: size(k),
          dstOffset: range.deviceOffset + k * this.piece,
          ...(range.signal ? { signal: range.signal } : {}),
        });
        if (k + this.slots < n) post(k + this.slots);
      }
    } finally {
      // Reads still in flight write into the pinned slots: they finish before the slots can be freed or reused.
      await Promise.allSettled(reads);
    }
    return { path: 'buffered' };
  };

  readonly toFile: DeviceToFile = async (file, src, range) => {
    const n = Math.ceil(range.bytes / this.piece);
    const size = (k: number): number => Math.min(this.piece, range.bytes - k * this.piece);
    const writes: Array<Promise<void>> = [];
    this.slot(0);
    try {
      for (let k = 0; k < n; k++) {
        if (range.signal?.aborted) throw aborted();
        // The slot's previous write must be done before the download overwrites it.
        if (k >= this.slots) await writes[k - this.slots];
        const { offset } = this.slot(k);
        await this.rt.download(this.ring!, src, { dstOffset: offset, bytes: size(k), srcOffset: range.deviceOffset + k * this.piece });
        const w = writeFully(file, this.ring!.view(offset, size(k)), range.offset + k * this.piece);
        w.catch(() => {});
        writes[k] = w;
      }
      await Promise.all(writes);
    } finally {
      await Promise.allSettled(writes);
    }
    return { path: 'buffered' };
  };

  /** Frees the pinned slots (after every transfer through them has settled). */
  [Symbol.dispose](): void {
    if (this.ring && !this.ring.disposed) this.ring.free();
    this.ring = undefined;
  }
}

/**
 * The mover the loader and writer use by default: the runtime's own file transfers (rt.uploadFile / rt.downloadFile:
 * the file read on the copy threads straight into the stager's pinned ring, O_DIRECT or cuFile where they pay), their
 * failures told in the format's terms (a file that ends early is `truncated`, an I/O error `read-failed` or
 * `write-failed`). `largestRange` is no longer needed: the stager's ring serves every range.
 */
export function runtimeFileMover(rt: Runtime, _largestRange: number): FileMover {
  const told = (e: unknown, problem: 'read-failed' | 'write-failed', what: string): unknown => {
    if (!(e instanceof GpuError)) return e;
    if ((e.code === ErrorCode.IO_ERROR && e.statusName === 'EOF') || (problem === 'read-failed' && e.code === ErrorCode.OUT_OF_BOUNDS)) {
      return new SafetensorsError('truncated', e.message, undefined, e);
    }
    if (e.code === ErrorCode.IO_ERROR) return new SafetensorsError(problem, `${what} failed (${e.statusName ?? e.message})`, undefined, e);
    return e;
  };
  return {
    toDevice: async (dst, file, r) => {
      try {
        const res = await rt.uploadFile(dst, file, { offset: r.offset, bytes: r.bytes, dstOffset: r.deviceOffset, ...(r.signal ? { signal: r.signal } : {}) });
        return { path: res.path };
      } catch (e) {
        throw told(e, 'read-failed', `reading ${r.bytes} bytes at byte ${r.offset}`);
      }
    },
    toFile: async (file, src, r) => {
      try {
        const res = await rt.downloadFile(file, src, {
          offset: r.offset,
          bytes: r.bytes,
          srcOffset: r.deviceOffset,
          ...(r.signal ? { signal: r.signal } : {}),
        });
        return { path: res.path };
      } catch (e) {
        throw told(e, 'write-failed', `writing ${r.bytes} bytes at byte ${r.offset}`);
      }
    },
    [Symbol.dispose]: () => {},
  };
}

/**
 * Exactly `bytes` of the file at `position`.
 * @throws (rejects) SafetensorsError truncated (the file ends first), read-failed
 */
export async function readRange(fh: FileHandle, position: number, bytes: number): Promise<Uint8Array> {
  const buf = new Uint8Array(bytes);
  await readFully(fh, buf, position);
  return buf;
}

export { writeFully };

/** What {@link verifyLoaded} found. */
export interface VerifyResult {
  readonly ok: boolean;
  readonly tensors: number;
  readonly bytes: number;
  /** The first tensor whose device bytes differ from its file bytes. */
  readonly mismatch?: { name: string; byte: number };
}

/**
 * Reads every loaded tensor back from the device and compares it with its bytes in its file, piece by piece.
 * @throws (rejects) SafetensorsError when a file cannot be read again; GpuError (ABORTED) once `signal` fires; what rt.download throws.
 */
export async function verifyLoaded(
  rt: Runtime,
  tensors: Iterable<{ name: string; allocation: Allocation; byteOffset: number; bytes: number; file: string; fileOffset: number }>,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<VerifyResult> {
  const handles = new Map<string, FileHandle>();
  const piece = 64 * MiB;
  let count = 0;
  let bytes = 0;
  try {
    for (const t of tensors) {
      count++;
      let fh = handles.get(t.file);
      if (!fh) {
        fh = await open(t.file, 'r').catch((e: unknown) => {
          throw new SafetensorsError('read-failed', `cannot open it again to verify (${(e as NodeJS.ErrnoException).code ?? e})`, t.file, e);
        });
        handles.set(t.file, fh);
      }
      for (let at = 0; at < t.bytes; at += piece) {
        if (options.signal?.aborted) throw new GpuError(ErrorCode.ABORTED, 'verifyLoaded was aborted');
        const n = Math.min(piece, t.bytes - at);
        const fromFile = await readRange(fh, t.fileOffset + at, n);
        const fromDevice = new Uint8Array(n);
        await rt.download(fromDevice, t.allocation, { srcOffset: t.byteOffset + at, bytes: n, signal: options.signal });
        if (!Buffer.from(fromFile.buffer, 0, n).equals(Buffer.from(fromDevice.buffer, 0, n))) {
          let i = 0;
          while (fromFile[i] === fromDevice[i]) i++;
          return { ok: false, tensors: count, bytes: bytes + at + i, mismatch: { name: t.name, byte: at + i } };
        }
      }
      bytes += t.bytes;
    }
  } finally {
    await Promise.allSettled([...handles.values()].map((h) => h.close()));
  }
  return { ok: true, tensors: count, bytes };
}
