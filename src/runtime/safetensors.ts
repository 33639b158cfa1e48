/**
 * safetensors checkpoints to device memory and back.
 *
 * `loadSafetensors(path, device)` reads a file, a folder or a sharded checkpoint's `model.safetensors.index.json`:
 * every header is read and checked in TypeScript before any memory is allocated (formats/safetensors.ts), then the
 * selected tensors go into one device allocation (or one from a resource, or a destination given) with as few file
 * reads as the selection allows: consecutive tensors are one range, so a whole file is one read. Each tensor keeps
 * its byte offset modulo 256 from the file, so a file whose tensors are aligned for their dtypes (the reference
 * writer's order makes them so) gives aligned device views. `saveSafetensors` writes device views or host buffers
 * as the reference writer does, through a temporary file renamed into place.
 *
 * Files are opened without blocking (a FIFO is refused, not waited on) and closed on every path; a failure frees
 * what the load allocated and writes nothing outside the destination's range.
 */
import { constants as fsc } from 'node:fs';
import { open, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ErrorCode, GpuError, InvalidArgumentError, isGpuError, OutOfMemoryError } from '../errors.js';
import { quoteValue } from '../input/quote.js';
import { formatBytes } from '../units.js';
import {
  layoutSafetensors,
  parseHeader,
  readHeaderLength,
  SAFETENSORS_MAX_HEADER_BYTES,
  SAFETENSORS_PREFIX_BYTES,
  SafetensorsError,
  type SafetensorsDtype,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from '../formats/safetensors.js';
import { parseShardIndex } from '../formats/safetensors-index.js';
import { Allocation } from '../memory/allocation.js';
import { Device } from '../memory/device.js';
import { Runtime } from './runtime.js';
import { readRange, runtimeFileMover, writeFully, type FileMover, type FilePath } from './safetensors-io.js';

/** A tensor in device memory: its place in the allocation and where it came from. */
export interface DeviceTensor {
  readonly name: string;
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
  readonly allocation: Allocation;
  /** Offset of the first byte in `allocation`. */
  readonly byteOffset: number;
  readonly bytes: number;
  /** The file it was read from, and the byte of that file it started at. */
  readonly file: string;
  readonly fileOffset: number;
}

/** What {@link loadSafetensors} loaded. Disposing it frees the allocation it made (never a destination given). */
export interface LoadedSafetensors extends Disposable {
  readonly runtime: Runtime;
  readonly allocation: Allocation;
  /** Tensors by name, in file order (shard by shard). */
  readonly tensors: ReadonlyMap<string, DeviceTensor>;
  /** `__metadata__` of the file (of the first shard for a sharded checkpoint). */
  readonly metadata: ReadonlyMap<string, string> | undefined;
  readonly files: readonly string[];
  /** Bytes read from the files; file reads (ranges) they took. */
  readonly bytes: number;
  readonly reads: number;
  /** Wall-clock seconds from the call until the last byte arrived (headers included); GB/s = bytes / seconds / 1e9. */
  readonly seconds: number;
  readonly gbps: number;
  /** How the bytes went from the files to the device. */
  readonly paths: readonly FilePath[];
}

/** Options of {@link loadSafetensors}. */
export interface LoadSafetensorsOptions {
  /** Which tensors to load: names (each must exist), or a predicate. Default: all. */
  filter?: readonly string[] | ((name: string, info: SafetensorsTensorInfo) => boolean);
  /** Allocate from this resource (a pool, an adaptor) instead of the device. */
  resource?: { readonly device: number | undefined; alloc(bytes: number): Allocation };
  /** Load into this memory (at `offset`) instead of allocating; it must hold the whole layout. */
  into?: Allocation | { allocation: Allocation; offset?: number };
  signal?: AbortSignal;
  /** @internal The file mover (tests inject faults through it). */
  mover?: FileMover;
}

const ALIGN = 256;
const INDEX = 'model.safetensors.index.json';
const SINGLE = 'model.safetensors';

interface OpenFile {
  name: string;
  fh: FileHandle;
  header: SafetensorsHeader;
}

function notFound(path: string, e: unknown, problem: 'missing-shard' | 'not-a-file' = 'not-a-file'): SafetensorsError {
  const code = (e as NodeJS.ErrnoException)?.code;
  const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'is a folder' : String(code ?? e);
  return new SafetensorsError(problem, `cannot open it: ${why}`, path, e);
}

/** Opens a regular file without blocking on a FIFO and reads and checks its header. Closes it on failure. */
async function openChecked(path: string, problem: 'missing-shard' | 'not-a-file' = 'not-a-file'): Promise<OpenFile> {
  let fh: FileHandle;
  try {
    fh = await open(path, fsc.O_RDONLY | fsc.O_NONBLOCK);
  } catch (e) {
    throw notFound(path, e, problem);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new SafetensorsError('not-a-file', 'not a regular file (a FIFO, a device or a folder cannot be loaded)', path);
    const size = st.size;
    const n = readHeaderLength(await readRange(fh, 0, Math.min(SAFETENSORS_PREFIX_BYTES, size)), size, path);
    const header = parseHeader(await readRange(fh, SAFETENSORS_PREFIX_BYTES, n), size, path);
    return { name: path, fh, header };
  } catch (e) {
    await fh.close().catch(() => {});
    throw withFile(e, path);
  }
}

/** Names the file on an error thrown without one. */
function withFile(e: unknown, file: string): unknown {
  if (e instanceof SafetensorsError && e.file === undefined) return new SafetensorsError(e.problem, e.message, file, e.cause);
  return e;
}

/**
 * The one allocation that holds every chosen tensor. Out of memory, the error names the checkpoint, how many tensors
 * asked for how much, and the largest of them (the allocator's own message says only the size).
 * @throws OutOfMemoryError
 */
function allocFor(chosen: ReadonlyArray<{ t: SafetensorsTensorInfo; run: Run }>, total: number, path: string, alloc: () => Allocation): Allocation {
  try {
    return alloc();
  } catch (e) {
    if (!(e instanceof OutOfMemoryError)) throw e;
    let largest: { t: SafetensorsTensorInfo; run: Run } | undefined;
    for (const c of chosen) if (!largest || c.t.bytes > largest.t.bytes) largest = c;
    const which = largest ? `; the largest, ${quoteValue(largest.t.name)} in ${largest.run.file.name}, is ${formatBytes(largest.t.bytes)}` : '';
    throw new OutOfMemoryError(
      `${path}: ${chosen.length} tensor(s) need ${formatBytes(total)} on device ${e.device ?? '?'}${which}: ${e.message}`,
      { requestedBytes: e.requestedBytes, device: e.device, freeBytes: e.freeBytes, totalBytes: e.totalBytes },
      { cause: e },
    );
  }
}

/** The files of a checkpoint and, for a sharded one, which tensors each shard contributes. */
async function resolveSources(path: string): Promise<{ files: string[]; wanted: Map<string, Set<string>> | undefined }> {
  const st = await stat(path).catch((e: unknown) => {
    throw notFound(path, e);
  });
  let index: string | undefined;
  if (st.isDirectory()) {
    const has = async (p: string): Promise<boolean> => (await stat(p).catch(() => undefined))?.isFile() === true;
    if (await has(join(path, INDEX))) index = join(path, INDEX);
    else if (await has(join(path, SINGLE))) return { files: [join(path, SINGLE)], wanted: undefined };
    else throw new SafetensorsError('not-a-file', `the folder holds neither ${INDEX} nor ${SINGLE}`, path);
  } else if (path.endsWith('.json')) index = path;
  if (index === undefined) return { files: [path], wanted: undefined };
  let text: string;
  const fh = await open(index, fsc.O_RDONLY | fsc.O_NONBLOCK).catch((e: unknown) => {
    throw notFound(index, e);
  });
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new SafetensorsError('not-a-file', 'not a regular file', index);
    // An index lists names and file names (a few hundred KiB for the largest models): the header's limit bounds it too.
    if (st.size > SAFETENSORS_MAX_HEADER_BYTES) throw new SafetensorsError('bad-index', `${st.size} bytes: larger than any index of names could be`, index);
    text = await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
  const idx = parseShardIndex(text, index);
  const wanted = new Map<string, Set<string>>(idx.shards.map((s) => [join(dirname(index), s), new Set()]));
  for (const [name, shard] of idx.weightMap) wanted.get(join(dirname(index), shard))!.add(name);
  return { files: [...wanted.keys()], wanted };
}

interface Run {
  file: OpenFile;
  /** Offset of the run in the byte buffer, and its length. */
  begin: number;
  bytes: number;
  /** Offset of the run in the destination. */
  at: number;
}

/**
 * Loads a safetensors file, a folder holding one (or a sharded checkpoint) or a shard index into device memory.
 * @returns named views into one allocation, with the rate and the path the bytes took.
 * @throws (rejects) SafetensorsError (GPUMEM_BAD_INPUT, `problem` says which rule a file broke or how a read
 *   failed); InvalidArgumentError for a filter naming a tensor that is not there, OUT_OF_BOUNDS for a destination
 *   too small, WRONG_DEVICE for memory of another device; OutOfMemoryError; GpuError ABORTED.
 */
export async function loadSafetensors(path: string, device: Device, options: LoadSafetensorsOptions = {}): Promise<LoadedSafetensors> {
  const t0 = performance.now();
  if (!(device instanceof Device)) throw new InvalidArgumentError('loadSafetensors: expected a device (rt.device(n))');
  const rt = device.runtime;
  if (!(rt instanceof Runtime)) throw new InvalidArgumentError('device: a device of a runtime opened with openRuntime() (the transfer engine moves the file)');
  rt.assertOpen();
  if (typeof path !== 'string' || path === '') throw new InvalidArgumentError('loadSafetensors: expected a path');
  const filter = options.filter;
  if (filter !== undefined && typeof filter !== 'function' && !Array.isArray(filter)) throw new InvalidArgumentError('filter: expected names or a function');
  const into = options.into instanceof Allocation ? { allocation: options.into, offset: 0 } : options.into;
  if (into && !(into.allocation instanceof Allocation)) throw new InvalidArgumentError('into: expected an allocation');
  const { files, wanted } = await resolveSources(path);
  const opened: OpenFile[] = [];
  let own: Allocation | undefined;
  let mover: FileMover | undefined;
  try {
    for (const f of files) opened.push(await openChecked(f, wanted ? 'missing-shard' : 'not-a-file'));
    const names = Array.isArray(filter) ? new Set<string>(filter) : undefined;
    const found = new Set<string>();
    const runs: Run[] = [];
    const chosen: Array<{ t: SafetensorsTensorInfo; run: Run }> = [];
    let cursor = 0;
    for (const file of opened) {
      const listed = wanted?.get(file.name);
      for (const name of listed ?? []) {
        if (!file.header.byName.has(name))
          throw new SafetensorsError('missing-tensor', `the index places "${name}" in this shard, which does not hold it`, file.name);
      }
      let run: Run | undefined;
      for (const t of file.header.tensors) {
        const take = (listed === undefined || listed.has(t.name)) && (names ? names.has(t.name) : typeof filter === 'function' ? filter(t.name, t) : true);
        if (!take) {
          run = undefined;
          continue;
        }
        found.add(t.name);
        if (!run) {
          // The smallest place at or after the cursor with the file's offset modulo 256: alignment carries over.
          const at = cursor + ((((t.begin - cursor) % ALIGN) + ALIGN) % ALIGN);
          run = { file, begin: t.begin, bytes: 0, at };
          runs.push(run);
        }
        run.bytes += t.bytes;
        cursor = run.at + run.bytes;
        chosen.push({ t, run });
      }
    }
    if (names) {
      const missing = [...names].filter((n) => !found.has(n));
      if (missing.length > 0)
        throw new InvalidArgumentError(
          `filter: no tensor named ${missing
            .slice(0, 5)
            .map((n) => JSON.stringify(n))
            .join(', ')}${missing.length > 5 ? ', ...' : ''} in ${path}`,
        );
    }
    const total = Math.max(cursor, 1);
    let allocation: Allocation;
    let base = 0;
    if (into) {
      const a = into.allocation;
      a.assertLive('into');
      base = into.offset ?? 0;
      if (a.kind !== 'device' && a.kind !== 'managed') throw new InvalidArgumentError(`into: expected device or managed memory, got ${a.kind} memory`);
      if (a.device !== device.index)
        throw new InvalidArgumentError(`into: the memory belongs to device ${a.device}, not ${device.index}`, ErrorCode.WRONG_DEVICE);
      if (!Number.isSafeInteger(base) || base < 0 || base + cursor > a.bytes) {
        throw new InvalidArgumentError(
          `into: the tensors need ${cursor} bytes from offset ${base}; the destination has ${a.bytes} bytes`,
          ErrorCode.OUT_OF_BOUNDS,
        );
      }
      allocation = a;
    } else if (options.resource) {
      if (options.resource.device !== device.index)
        throw new InvalidArgumentError(`resource: it allocates on device ${options.resource.device}, not ${device.index}`, ErrorCode.WRONG_DEVICE);
      allocation = own = allocFor(chosen, total, path, () => options.resource!.alloc(total));
    } else {
      allocation = own = allocFor(chosen, total, path, () => device.alloc(total));
    }
    mover =
      options.mover ??
      runtimeFileMover(
        rt,
        runs.reduce((m, r) => Math.max(m, r.bytes), 0),
      );
    const paths = new Set<FilePath>();
    let bytes = 0;
    let reads = 0;
    for (const r of runs) {
      if (r.bytes === 0) continue;
      if (options.signal?.aborted) throw new GpuError(ErrorCode.ABORTED, 'loadSafetensors was aborted');
      try {
        const res = await mover.toDevice(allocation, r.file.fh, {
          offset: r.file.header.dataOffset + r.begin,
          bytes: r.bytes,
          deviceOffset: base + r.at,
          signal: options.signal,
        });
        paths.add(res.path);
      } catch (e) {
        throw withFile(e, r.file.name);
      }
      bytes += r.bytes;
      reads++;
    }
    const tensors = new Map<string, DeviceTensor>();
    for (const { t, run } of chosen) {
      tensors.set(t.name, {
        name: t.name,
        dtype: t.dtype,
        shape: t.shape,
        allocation,
        byteOffset: base + run.at + (t.begin - run.begin),
        bytes: t.bytes,
        file: run.file.name,
        fileOffset: run.file.header.dataOffset + t.begin,
      });
    }
    const seconds = (performance.now() - t0) / 1e3;
    const owned = own;
    own = undefined;
    return {
      runtime: rt,
      allocation,
      tensors,
      metadata: opened[0]?.header.metadata,
      files,
      bytes,
      reads,
      seconds,
      gbps: bytes / seconds / 1e9,
      paths: [...paths],
      [Symbol.dispose]: () => {
        if (owned && !owned.disposed) owned.free();
      },
    };
  } finally {
    if (!options.mover) mover?.[Symbol.dispose]();
    if (own && !own.disposed) own.free();
    await Promise.allSettled(opened.map((f) => f.fh.close()));
  }
}

/** Data of a tensor to save: host bytes, or device (or host) memory at an offset. */
export type SafetensorsData = ArrayBuffer | ArrayBufferView | { readonly allocation: Allocation; readonly byteOffset?: number };

/** A tensor to save. A {@link DeviceTensor} is one. */
export interface SaveTensor {
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
  /** Where the bytes are; a DeviceTensor's own allocation and offset when absent. */
  readonly data?: SafetensorsData;
  readonly allocation?: Allocation;
  readonly byteOffset?: number;
}

/** Options of {@link saveSafetensors}. */
export interface SaveSafetensorsOptions {
  /** `__metadata__` (default: that of a LoadedSafetensors given). */
  metadata?: ReadonlyMap<string, string> | Readonly<Record<string, string>>;
  /** The runtime that reads device memory (default: the allocation's own, or the LoadedSafetensors'). */
  runtime?: Runtime;
  signal?: AbortSignal;
  /** @internal */
  mover?: FileMover;
}

/** What {@link saveSafetensors} wrote. */
export interface SaveResult {
  readonly file: string;
  readonly bytes: number;
  readonly tensors: number;
  readonly seconds: number;
  readonly gbps: number;
}

type Source = { kind: 'host'; bytes: Uint8Array } | { kind: 'device'; allocation: Allocation; offset: number };

function sourceOf(name: string, t: SaveTensor, bytes: number): Source {
  const data = t.data ?? (t.allocation ? { allocation: t.allocation, byteOffset: t.byteOffset ?? 0 } : undefined);
  if (data === undefined) throw new InvalidArgumentError(`tensor "${name}": no data`);
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
    const u = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (u.byteLength !== bytes)
      throw new InvalidArgumentError(`tensor "${name}": ${u.byteLength} bytes of data for a ${bytes}-byte tensor`, ErrorCode.INVALID_SIZE);
    return { kind: 'host', bytes: u };
  }
  const a = (data as { allocation?: unknown }).allocation;
  if (!(a instanceof Allocation)) throw new InvalidArgumentError(`tensor "${name}": data must be a buffer or { allocation, byteOffset }`);
  a.assertLive(`tensor "${name}"`);
  const offset = (data as { byteOffset?: number }).byteOffset ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + bytes > a.bytes) {
    throw new InvalidArgumentError(`tensor "${name}": ${bytes} bytes from offset ${offset} reach past the ${a.bytes}-byte allocation`, ErrorCode.OUT_OF_BOUNDS);
  }
  if (a.hostVisible && a.kind !== 'managed') return { kind: 'host', bytes: a.view(offset, bytes) };
  return { kind: 'device', allocation: a, offset };
}

/**
 * Writes tensors (host buffers or device memory) to a safetensors file as the reference writer lays it out. The
 * file appears whole or not at all: it is written beside `file` under a temporary name and renamed into place.
 * @throws (rejects) InvalidArgumentError before anything is written (names, dtypes, shapes, sizes, bounds; a device
 *   tensor without a runtime); SafetensorsError read-failed when writing fails; GpuError ABORTED.
 */
export async function saveSafetensors(
  file: string,
  tensors: LoadedSafetensors | ReadonlyMap<string, SaveTensor> | Readonly<Record<string, SaveTensor>>,
  options: SaveSafetensorsOptions = {},
): Promise<SaveResult> {
  const t0 = performance.now();
  const loaded = 'tensors' in tensors && tensors.tensors instanceof Map && 'runtime' in tensors ? (tensors as LoadedSafetensors) : undefined;
  const entries: Array<[string, SaveTensor]> = loaded
    ? [...loaded.tensors]
    : tensors instanceof Map
      ? [...(tensors as ReadonlyMap<string, SaveTensor>)]
      : Object.entries(tensors as Record<string, SaveTensor>);
  const layout = layoutSafetensors(
    entries.map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape })),
    options.metadata ?? loaded?.metadata,
  );
  const sources = layout.tensors.map((t) => sourceOf(t.name, entries[t.index]![1], t.bytes));
  let rt = options.runtime ?? loaded?.runtime;
  for (const s of sources) {
    if (s.kind !== 'device') continue;
    if (!rt && s.allocation.owner instanceof Runtime) rt = s.allocation.owner;
    if (!rt) throw new InvalidArgumentError('saveSafetensors: device memory from a resource needs options.runtime to be read');
    rt.resolve(s.allocation, 'saveSafetensors');
  }
  const largest = layout.tensors.reduce((m, t, i) => (sources[i]!.kind === 'device' ? Math.max(m, t.bytes) : m), 0);
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  let fh: FileHandle | undefined;
  let mover: FileMover | undefined;
  try {
    fh = await open(temp, 'wx').catch((e: unknown) => {
      throw new SafetensorsError('write-failed', `cannot create a file beside it (${(e as NodeJS.ErrnoException).code ?? e})`, file, e);
    });
    await writeFully(fh, layout.prefix, 0);
    mover = options.mover ?? (rt && largest > 0 ? runtimeFileMover(rt, largest) : undefined);
    for (const [i, t] of layout.tensors.entries()) {
      if (options.signal?.aborted) throw new GpuError(ErrorCode.ABORTED, 'saveSafetensors was aborted');
      const s = sources[i]!;
      const at = layout.dataOffset + t.begin;
      if (t.bytes === 0) continue;
      if (s.kind === 'host') await writeFully(fh, s.bytes, at);
      else await mover!.toFile(fh, s.allocation, { offset: at, bytes: t.bytes, deviceOffset: s.offset, signal: options.signal });
    }
    await fh.close();
    fh = undefined;
    await rename(temp, file);
  } catch (e) {
    await fh?.close().catch(() => {});
    await unlink(temp).catch(() => {});
    throw isGpuError(e) ? withFile(e, file) : new SafetensorsError('write-failed', `writing failed: ${e instanceof Error ? e.message : String(e)}`, file, e);
  } finally {
    if (!options.mover) mover?.[Symbol.dispose]();
  }
  const seconds = (performance.now() - t0) / 1e3;
  return { file, bytes: layout.fileBytes, tensors: layout.tensors.length, seconds, gbps: layout.fileBytes / seconds / 1e9 };
}
