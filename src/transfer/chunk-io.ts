/**
 * A chunk's copies (see flow.ts): the host threads fill its slot from host memory or a file, or drain it back; the
 * device copy lands it. Segments that continue each other on both sides (arrays that sit back to back in device
 * memory, slices of one host buffer) are merged first, so that a list of 128 arrays of 64 KiB bound for one device
 * buffer lands with one 8 MiB copy, and arrays elsewhere with one batched copy of their pieces. Also the host spans a
 * chunk touches, for the hazard check.
 */
import { CopyKind, type Backend, type Handle, type HostCopier } from '../backend/backend.js';
import { ErrorCode, GpuError } from '../errors.js';
import { PageableAllocation } from '../memory/allocation.js';
import type { Chunk, FlowHost } from './flow-types.js';
import type { HostSpans } from './hazards.js';
import { PIECE } from './piece-queue.js';
import type { SegmentList } from './segment-list.js';

const U32 = 2 ** 32;

/** The host threads fill the chunk's slot: a copy, a gather of several, or a file read. */
export function fillChunk(host: FlowHost, c: Chunk): Promise<void> {
  const copier = host.copier();
  const s = c.segs;
  const base = c.slot ? c.slot.memory.address : 0;
  if (c.mode === 'file') {
    const f = s.transfer[0]!.file!;
    const need = s.at[0]! + s.bytes[0]!;
    return copier.readFile ? copier.readFile(f.fd, base, c.fileBytes, c.fileStart, need) : host.readInto(f.fd, base, c.fileBytes, c.fileStart, need);
  }
  if (c.mode === 'direct') return Promise.resolve();
  return hostCopies(copier, s, mergeHostCopies(s, base, true));
}

/** The host threads empty the chunk's slot into host memory (a scatter) or into the file. */
export function drainChunk(host: FlowHost, c: Chunk): Promise<void> {
  const copier = host.copier();
  const s = c.segs;
  const base = c.slot ? c.slot.memory.address : 0;
  if (c.mode === 'file') {
    const f = s.transfer[0]!.file!;
    const at = base + s.at[0]!;
    return copier.writeFile ? copier.writeFile(f.fd, at, s.bytes[0]!, s.host[0]!) : host.writeFrom(f.fd, at, s.bytes[0]!, s.host[0]!);
  }
  if (c.mode === 'direct') return Promise.resolve();
  return hostCopies(copier, s, mergeHostCopies(s, base, false));
}

/** Writes the chunk's host copies (slot <-> host memory) into the list's scratch, merged; answers how many. */
function mergeHostCopies(s: SegmentList, base: number, intoSlot: boolean): number {
  let n = 0;
  // In segment order (the order the buffers were placed in), even where the slot was laid out by device address.
  for (let i = 0; i < s.count; i++) {
    const slot = base + s.at[i]!;
    const h = s.host[i]!;
    const d = intoSlot ? slot : h;
    const src = intoSlot ? h : slot;
    const b = s.bytes[i]!;
    if (n > 0 && s.copyDst[n - 1]! + s.copyBytes[n - 1]! === d && s.copySrc[n - 1]! + s.copyBytes[n - 1]! === src) {
      s.copyBytes[n - 1] = s.copyBytes[n - 1]! + b;
      continue;
    }
    s.copyDst[n] = d;
    s.copySrc[n] = src;
    s.copyBytes[n] = b;
    n++;
  }
  return n;
}

/** One request to the threads for the chunk's `n` host copies (they read the lists before the call returns). */
function hostCopies(copier: HostCopier, s: SegmentList, n: number): Promise<void> {
  const gone = detached(s);
  if (gone) return Promise.reject(gone);
  let done: Promise<void>;
  if (n === 1) done = copier.copy(s.copyDst[0]!, s.copySrc[0]!, s.copyBytes[0]!);
  else if (copier.copyMany) done = copier.copyMany(s.copyDst.subarray(0, n), s.copySrc.subarray(0, n), s.copyBytes.subarray(0, n));
  else {
    const all: Array<Promise<void>> = [];
    for (let i = 0; i < n; i++) all.push(copier.copy(s.copyDst[i]!, s.copySrc[i]!, s.copyBytes[i]!));
    done = Promise.all(all).then(() => {});
  }
  // A buffer detached while the copy was queued: the copier's own failure (a TypeError on the host backend) says less.
  return done.catch((e: unknown) => {
    throw detached(s) ?? e;
  });
}

/**
 * The error for a chunk whose JS buffer was detached (transferred to a worker, `structuredClone` with `transfer`)
 * while its transfer was in flight: its memory is no longer the program's to read or write. Undefined otherwise.
 */
function detached(s: SegmentList): GpuError | undefined {
  let last: object | string | undefined;
  for (let i = 0; i < s.count; i++) {
    const k = s.key[i];
    // A run of segments in one buffer (views of one pool, pieces of one array) is looked at once.
    if (k === last) continue;
    last = k;
    const buffer = k instanceof ArrayBuffer ? k : k instanceof PageableAllocation ? k.buffer : undefined;
    if (buffer && buffer.byteLength === 0) {
      const dir = s.transfer[i]!.direction;
      return new GpuError(
        ErrorCode.INVALID_STATE,
        `${dir}: the ${dir === 'upload' ? 'source' : 'destination'} ArrayBuffer was detached while the transfer was in flight`,
      );
    }
  }
  return undefined;
}

/**
 * Enqueues the chunk's device copies on `stream`: segments merged where they continue each other on both sides,
 * then one copy, or one batched copy where the runtime has the batch call and every copy may go in it (pinned host
 * memory, no managed memory), else one copy each.
 */
export function copyChunk(b: Backend, c: Chunk, device: number, stream: Handle): void {
  const s = c.segs;
  const up = c.direction === 'upload';
  const direct = c.mode === 'direct';
  const base = c.slot ? c.slot.memory.address : 0;
  let n = 0;
  let batchable = true;
  let lastFlags = -1;
  // In slot order (segment order unless the chunk was laid out by device address): that is where pieces continue each other.
  const order = s.placed ? s.slotOrder : undefined;
  for (let k = 0; k < s.count; k++) {
    const i = order ? order[k]! : k;
    const hostAt = direct ? s.host[i]! : base + s.at[i]!;
    const devAt = s.dev[i]!;
    const d = up ? devAt : hostAt;
    const src = up ? hostAt : devAt;
    const bytes = s.bytes[i]!;
    const flags = s.flags[i]!;
    if (n > 0 && flags === lastFlags && s.copyDst[n - 1]! + s.copyBytes[n - 1]! === d && s.copySrc[n - 1]! + s.copyBytes[n - 1]! === src) {
      s.copyBytes[n - 1] = s.copyBytes[n - 1]! + bytes;
      continue;
    }
    s.copyDst[n] = d;
    s.copySrc[n] = src;
    s.copyBytes[n] = bytes;
    s.copyFlags[n] = flags;
    lastFlags = flags;
    if ((flags & PIECE.MANAGED) !== 0 || (direct && (flags & PIECE.PINNED) === 0)) batchable = false;
    n++;
  }
  if (n > 1 && batchable && b.capabilities.batchCopies) {
    b.memcpyBatchAsync(batchOf(s, n, up, device), stream);
    return;
  }
  for (let i = 0; i < n; i++) {
    const kind = (s.copyFlags[i]! & PIECE.MANAGED) !== 0 ? CopyKind.Default : up ? CopyKind.HostToDevice : CopyKind.DeviceToHost;
    b.memcpyAsync(s.copyDst[i]!, s.copySrc[i]!, s.copyBytes[i]!, kind, stream);
  }
}

/** The list's first `n` copies as the batch call takes them: one run, host to device or device to host. */
function batchOf(s: SegmentList, n: number, up: boolean, device: number) {
  for (let i = 0; i < n; i++) {
    const d = s.copyDst[i]!;
    const src = s.copySrc[i]!;
    const z = s.copyBytes[i]!;
    s.batchDst[2 * i] = d % U32;
    s.batchDst[2 * i + 1] = (d / U32) >>> 0;
    s.batchSrc[2 * i] = src % U32;
    s.batchSrc[2 * i + 1] = (src / U32) >>> 0;
    s.batchBytes[2 * i] = z % U32;
    s.batchBytes[2 * i + 1] = (z / U32) >>> 0;
  }
  const dev = { type: 'device' as const, device };
  const host = { type: 'host' as const };
  return {
    count: n,
    dsts: s.batchDst.subarray(0, 2 * n),
    srcs: s.batchSrc.subarray(0, 2 * n),
    sizes: s.batchBytes.subarray(0, 2 * n),
    runs: [{ first: 0, src: up ? host : dev, dst: up ? dev : host }],
  };
}

/**
 * A chunk's host spans per buffer (offsets from the buffer's start; file offsets for a file), consecutive segments
 * in one buffer merged: columns sized for the chunk, made once per chunk that needs them (a writing chunk keeps them
 * while its host work lasts, see hazards.ts).
 */
export function spansOf(c: Chunk): HostSpans {
  const s = c.segs;
  if (c.mode === 'file') {
    return { count: 1, keys: [s.transfer[0]!.file!.key], starts: Float64Array.of(c.fileStart), ends: Float64Array.of(c.fileStart + c.fileBytes) };
  }
  const keys: Array<object | string> = new Array(s.count);
  const starts = new Float64Array(s.count);
  const ends = new Float64Array(s.count);
  let last = -1;
  let lastKey: object | string | undefined;
  for (let i = 0; i < s.count; i++) {
    const key = s.key[i]!;
    const at = s.host[i]! - s.keyBase[i]!;
    const end = at + s.bytes[i]!;
    if (key === lastKey) {
      if (at < starts[last]!) starts[last] = at;
      if (end > ends[last]!) ends[last] = end;
      continue;
    }
    last++;
    keys[last] = key;
    starts[last] = at;
    ends[last] = end;
    lastKey = key;
  }
  keys.length = last + 1;
  return { count: last + 1, keys, starts, ends };
}
