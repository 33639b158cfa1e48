import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';
import type { HostCopier } from '../backend/backend.js';
import type { MemoryRef } from '../memory/copy.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import { checkInteger, checkSize } from '../memory/validate.js';
import type { Stream } from '../stream/stream.js';
import { transferDefaults } from './defaults.js';
import { cufileRegister, cufileUnavailable, type CufileHandle } from './cufile-path.js';
import { openForRead, openForWrite, type FileRef, type OpenedFile } from './file-source.js';
import { Flow, type Transfer, type TransferMode, type TransferOwner } from './flow.js';
import { CallItems, ITEM_PATHS, type CallShape, type CallSite } from './call-items.js';
import { PIECE } from './piece-queue.js';
import { StagerResources } from './stager-host.js';
import { checkOptions, resolveDeviceSide, type DeviceSide } from './stager-checks.js';
import { checkTransferRange, type HostBuffer } from './host-buffer.js';
import { Ring } from './ring.js';
import type {
  DownloadItem,
  FileTransferOptions,
  FileTransferResult,
  ManyOptions,
  ManyResult,
  StagerOptions,
  TransferOptions,
  TransferPath,
  TransferResult,
  UploadItem,
} from './transfer-types.js';

export type * from './transfer-types.js';

const KiB = 1024;

export class Stager implements Disposable {
  readonly device: number;
  readonly threads: number;
  readonly chunkBytes: number;
  readonly depth: number;
  readonly directBelow: number;
  readonly numaLocal: boolean;
  /** @internal */
  readonly ring: Ring;
  /** @internal */
  readonly flow: Flow;
  private readonly res: StagerResources;
  /** What every call's items are checked against and settle through (one object per stager, none per call). */
  private readonly site: CallSite;
  private disposed = false;
  private warmed = false;

  /**
   * @throws InvalidArgumentError (INVALID_SIZE) for a chunk size below 4 KiB or a ring beyond the pinned budget,
   *   INVALID_ARGUMENT for a thread count or depth out of range or an unknown device.
   */
  constructor(
    readonly rt: MemoryRuntime,
    options: StagerOptions = {},
  ) {
    const d = transferDefaults();
    this.device = rt.device(options.device ?? 0).index;
    this.threads = options.copier ? options.copier.threads : checkInteger(options.threads ?? d.threads, 'stager threads', 1, 64);
    this.depth = checkInteger(options.depth ?? d.depth, 'stager depth', 2, 64);
    this.chunkBytes = checkSize(options.chunkBytes ?? d.chunkBytes, 'stager chunk', { max: d.pinnedBudgetBytes });
    if (this.chunkBytes < 4 * KiB) throw new InvalidArgumentError(`stager chunk: at least 4096 bytes, got ${this.chunkBytes}`, ErrorCode.INVALID_SIZE);
    if (this.chunkBytes * this.depth > d.pinnedBudgetBytes) {
      throw new InvalidArgumentError(
        `stager: ${this.depth} chunks of ${this.chunkBytes} bytes exceed the pinned budget of ${d.pinnedBudgetBytes} bytes (1/16 of this machine's memory)`,
        ErrorCode.INVALID_SIZE,
      );
    }
    this.directBelow = checkSize(options.directBelow ?? d.directBelow, 'stager directBelow', { allowZero: true });
    this.numaLocal = options.numaLocal ?? true;
    const node = this.numaLocal ? rt.numaNodeFor(this.device) : undefined;
    this.ring = new Ring(rt, this.device, this.chunkBytes, this.depth, node, () => this.res.pinner());
    this.res = new StagerResources(rt, this.device, this.ring, this.threads, options.copier);
    this.flow = new Flow(this.res);
    this.site = { rt, device: this.device, flow: this.flow, settled: (items, e) => this.callSettled(items, e) };
  }

  /**
   * Starts what the first transfer would otherwise wait for, in the background: the host threads, the stream and the
   * ring's pinned chunks (on the host threads where they can pin, else one per turn of the event loop). Without it the
   * first transfer pins one chunk itself and the others join as the threads deliver them.
   */
  warm(): void {
    if (this.warmed || this.disposed || this.rt.disposed) return;
    this.warmed = true;
    this.copier();
    this.stream();
    this.ring.warm();
  }

  /**
   * Copies host memory (a JS buffer or a host allocation) into device or managed memory.
   * @throws (rejects) InvalidArgumentError for bad arguments, before anything is copied; GpuError ABORTED, BUSY,
   *   NATIVE; DisposedError.
   */
  upload(dst: MemoryRef, src: HostBuffer, options: TransferOptions = {}): Promise<TransferResult> {
    return this.one('upload', dst, src, options);
  }

  /**
   * Copies device or managed memory into host memory (a JS buffer or a host allocation).
   * @throws as upload.
   */
  download(dst: HostBuffer, src: MemoryRef, options: TransferOptions = {}): Promise<TransferResult> {
    return this.one('download', src, dst, options);
  }

  /**
   * Uploads a list of buffers, each to its place, as one transfer: small ones are packed into shared chunks and
   * land with one batched copy per chunk. Every item is checked before anything is copied.
   * @throws (rejects) InvalidArgumentError naming the item; as upload otherwise.
   */
  uploadMany(items: readonly UploadItem[], options: ManyOptions = {}): Promise<ManyResult> {
    return this.many('upload', items, options);
  }

  /**
   * Downloads device memory into a list of buffers as one transfer. See {@link uploadMany}.
   * @throws as uploadMany.
   */
  downloadMany(items: readonly DownloadItem[], options: ManyOptions = {}): Promise<ManyResult> {
    return this.many('download', items, options);
  }

  /**
   * Reads a range of a file into device or managed memory through the ring, the reads done by the host threads
   * (pread, O_DIRECT where the file is mostly not cached and the file system allows it) while the copy engine moves
   * the chunk before. No JS buffer holds the data; files of any size.
   * @throws (rejects) InvalidArgumentError (not a regular file, the range past the end: OUT_OF_BOUNDS, a destination
   *   too small), GpuError IO_ERROR (open, read, a file that ends early), ABORTED, DisposedError.
   */
  uploadFile(dst: MemoryRef, file: FileRef, options: FileTransferOptions = {}): Promise<FileTransferResult> {
    const t0 = performance.now();
    try {
      this.assertUsable();
      const dev = this.resolveDevice(dst, 'uploadFile destination');
      const stream = this.checkCommon(options, 'uploadFile', ['auto', 'direct', 'buffered', 'cufile']);
      const copier = this.copier();
      const noDirect = copier.readFile ? undefined : `the ${this.rt.backend.name} backend reads files through Node's fs, into memory not aligned for O_DIRECT`;
      const cached = copier.cachedShare ? (fd: number, r: { offset: number; bytes: number }) => copier.cachedShare?.(fd, r.offset, r.bytes) : undefined;
      const ask = options.path ?? 'auto';
      const noCufile = ask === 'cufile' || ask === 'auto' ? cufileUnavailable(this.rt.backend, dev.allocation, ask === 'auto') : 'not asked';
      const way = noCufile === undefined ? 'direct' : ask === 'cufile' ? 'buffered' : ask;
      const opened = openForRead(file, {
        offset: options.offset,
        bytes: options.bytes,
        path: way,
        noDirect: noCufile === undefined ? undefined : noDirect,
        cached,
      });
      const { range } = opened;
      try {
        const devRange = checkTransferRange(options.dstOffset, range.bytes, dev.allocation.bytes - dev.offset, 'uploadFile destination');
        // A file cuFile refuses (no nvidia-fs, its compatibility mode off) goes through the ring, saying why.
        const cufile =
          noCufile === undefined && opened.file.direct ? cufileRegister(opened.file.fd) : { error: noCufile ?? opened.file.fallback ?? 'O_DIRECT refused' };
        if (!('error' in cufile)) {
          return this.cufileTransfer('upload', dev, devRange.offset, opened.file, cufile, range.offset, range.bytes, options.stream, options.signal, t0);
        }
        const fallback = ask === 'cufile' || noCufile === undefined ? `cuFile: ${cufile.error}` : opened.file.fallback;
        return this.fileTransfer('upload', dev, devRange.offset, opened.file, range.offset, range.bytes, stream, options.signal, t0, fallback);
      } catch (e) {
        opened.file.close();
        throw e;
      }
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Writes device or managed memory into a file at an offset (created if a path names none; never truncated),
   * through the ring, the writes done by the host threads (pwrite through the page cache).
   * @throws as uploadFile.
   */
  downloadFile(file: FileRef, src: MemoryRef, options: FileTransferOptions = {}): Promise<FileTransferResult> {
    const t0 = performance.now();
    try {
      this.assertUsable();
      const dev = this.resolveDevice(src, 'downloadFile source');
      const stream = this.checkCommon(options, 'downloadFile', ['auto', 'direct', 'buffered', 'cufile']);
      const devRange = checkTransferRange(options.srcOffset, options.bytes, dev.allocation.bytes - dev.offset, 'downloadFile source');
      const opened = openForWrite(file, options.offset);
      const fallback = options.path === 'direct' || options.path === 'cufile' ? 'downloads write through the page cache (pwrite)' : undefined;
      return this.fileTransfer('download', dev, devRange.offset, opened.file, opened.offset, devRange.bytes, stream, options.signal, t0, fallback);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private one(direction: 'upload' | 'download', devRef: MemoryRef, hostBuf: HostBuffer, o: TransferOptions): Promise<TransferResult> {
    const t0 = performance.now();
    return new Promise<TransferResult>((resolve, reject) => {
      this.assertUsable();
      const items = new CallItems(this.site, this.shape(direction, direction, o, 1, this.directBelow));
      items.t0 = t0;
      items.resolve = resolve;
      items.reject = reject;
      try {
        items.add(devRef, hostBuf, o);
      } catch (e) {
        items.refuse();
        throw e;
      }
      this.flow.submitted();
    });
  }

  private many(direction: 'upload' | 'download', list: readonly (UploadItem | DownloadItem)[], o: ManyOptions): Promise<ManyResult> {
    const t0 = performance.now();
    return new Promise<ManyResult>((resolve, reject) => {
      this.assertUsable();
      const name = direction === 'upload' ? 'uploadMany' : 'downloadMany';
      if (!Array.isArray(list)) throw new InvalidArgumentError(`${name}: expected an array of items`);
      if (list.length === 0) throw new InvalidArgumentError(`${name}: the list is empty`, ErrorCode.INVALID_SIZE);
      // A list of one is a transfer alone: small, it may go as one runtime copy; in a longer list every item is packed.
      const items = new CallItems(this.site, this.shape(direction, name, o, list.length, list.length === 1 ? this.directBelow : 0));
      items.t0 = t0;
      items.resolve = resolve;
      items.reject = reject;
      try {
        items.addList(list);
      } catch (e) {
        items.refuse();
        throw e;
      }
      this.flow.submitted(2);
    });
  }

  /** A call settled: it resolves with what it did (a list with each item's path), or rejects with its failure. */
  private callSettled(items: CallItems, error: unknown): void {
    if (error !== undefined) return items.reject(error);
    const r = this.result(items.direction, items.path, items.bytes, items.chunks, items.t0);
    items.resolve((items.list ? manyResult(r, items.count, items.pathCodes) : r) as never);
  }

  /** A call's shape, its options checked (the stream, the path asked, the signal). */
  private shape(direction: 'upload' | 'download', name: string, o: TransferOptions | ManyOptions, items: number, smallBelow: number): CallShape {
    const stream = this.checkCommon(o, name, ['auto', 'staged', 'direct']);
    return { direction, name, list: name !== direction, asked: o.path ?? 'auto', stream, signal: o.signal, items, smallBelow };
  }

  private fileTransfer(
    direction: 'upload' | 'download',
    dev: DeviceSide,
    devOffset: number,
    file: OpenedFile,
    fileOffset: number,
    bytes: number,
    stream: Stream,
    signal: AbortSignal | undefined,
    t0: number,
    fallback: string | undefined,
  ): Promise<FileTransferResult> {
    return new Promise<FileTransferResult>((resolve, reject) => {
      const path = file.direct ? 'direct' : 'buffered';
      const owner: TransferOwner = {
        transferFinished: (t, e) => {
          dev.allocation.unhold();
          file.close();
          if (e !== undefined) reject(e);
          else resolve({ ...this.result(direction, path, bytes, t.chunks, t0, true), path, fallback });
        },
      };
      const t = this.transfer(direction, 'file', stream, signal, bytes, { fd: file.fd, direct: file.direct, key: file.key }, owner);
      dev.allocation.hold();
      const a = dev.allocation;
      this.flow.push(t, fileOffset, a.address + dev.offset + devOffset, bytes, PIECE.PINNED | (a.kind === 'managed' ? PIECE.MANAGED : 0), file.key, 0);
      this.flow.submitted();
    });
  }

  /** A file transfer through cuFile, after the transfers queued before it (and the stream's work) have finished. */
  private async cufileTransfer(
    direction: 'upload' | 'download',
    dev: DeviceSide,
    devOffset: number,
    file: OpenedFile,
    cufile: CufileHandle,
    fileOffset: number,
    bytes: number,
    stream: Stream | undefined,
    signal: AbortSignal | undefined,
    t0: number,
  ): Promise<FileTransferResult> {
    dev.allocation.hold();
    try {
      await this.flow.drained();
      await stream?.synchronize();
      await cufile.transfer(direction, dev.allocation, dev.offset + devOffset, fileOffset, bytes, signal);
      return { ...this.result(direction, 'cufile', bytes, Math.ceil(bytes / (64 * 2 ** 20)), t0), path: 'cufile' };
    } finally {
      cufile.close();
      dev.allocation.unhold();
      file.close();
    }
  }

  private transfer(
    direction: 'upload' | 'download',
    mode: TransferMode,
    stream: Stream,
    signal: AbortSignal | undefined,
    bytes: number,
    file: Transfer['file'],
    owner: TransferOwner,
  ): Transfer {
    return { direction, mode, file, stream, signal, left: bytes, chunks: 0, inFlight: 0, failed: undefined, settled: false, owner };
  }

  /** Checks the options every call shares; answers the stream the device copies go on. */
  private checkCommon(o: { stream?: Stream | undefined; signal?: AbortSignal | undefined; path?: string | undefined }, what: string, paths: string[]): Stream {
    return checkOptions(this.rt, this.device, o, what, paths) ?? this.stream();
  }

  private resolveDevice(ref: MemoryRef, what: string): DeviceSide {
    return resolveDeviceSide(this.rt, this.device, ref, what);
  }

  private result(direction: 'upload' | 'download', path: TransferPath, bytes: number, chunks: number, t0: number, ring = path === 'staged'): TransferResult {
    const seconds = (performance.now() - t0) / 1e3;
    return {
      direction,
      path,
      bytes,
      chunks,
      threads: ring ? this.threads : 0,
      chunkBytes: ring ? this.chunkBytes : bytes,
      seconds,
      gbps: bytes / seconds / 1e9,
    };
  }

  private assertUsable(): void {
    if (this.disposed) throw new DisposedError('the stager was disposed');
    this.rt.assertOpen();
  }

  /** @internal The host threads, started on first use. */
  copier(): HostCopier {
    return this.res.copier();
  }

  private stream(): Stream {
    return this.res.stream();
  }

  /**
   * Stops the transfers still queued (they reject), waits on this thread for the host threads' work in flight and the
   * stream's, then frees the ring, the events and the stream. Transfers in flight reject.
   */
  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.disposed = true;
    this.flow.abandon(new DisposedError('the stager was disposed before the transfer finished'));
    this.res.dispose();
  }
}

/**
 * A list's result, its `paths` made from the items' path codes when first read (a list of 16384 items does not
 * build an array of 16384 names that nobody may look at).
 */
function manyResult(base: TransferResult, items: number, codes: Uint8Array): ManyResult {
  let paths: TransferPath[] | undefined;
  const r = { ...base, items } as ManyResult;
  Object.defineProperty(r, 'paths', {
    enumerable: true,
    configurable: true,
    get: () => (paths ??= Array.from(codes, (c) => ITEM_PATHS[c]!)),
    set: (v: TransferPath[]) => {
      paths = v;
    },
  });
  return r;
}
