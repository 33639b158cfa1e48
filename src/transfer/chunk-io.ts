/**
 * A chunk's host work (the threads fill its slot from host memory or a file, or drain it back) and the pieces that
 * describe it to the runtime's batch call and to the hazard check. See flow.ts.
 */
import type { HostCopier, NativeCopyBatch } from '../backend/backend.js';
import { ErrorCode, GpuError } from '../errors.js';
import { PageableAllocation } from '../memory/allocation.js';
import type { Chunk, FlowHost, Segment } from './flow-types.js';

/** The host threads fill the chunk's slot: a copy, a gather of several, or a file read. */
export function fillChunk(host: FlowHost, c: Chunk): Promise<void> {
  const copier = host.copier();
  const base = c.slot ? c.slot.memory.address : 0;
  if (c.mode === 'file') {
    const f = c.segs[0]!.job.file!;
    const need = c.segs[0]!.at + c.segs[0]!.bytes;
    return copier.readFile ? copier.readFile(f.fd, base, c.fileBytes, c.fileStart, need) : host.readInto(f.fd, base, c.fileBytes, c.fileStart, need);
  }
  if (c.mode === 'direct') return Promise.resolve();
  return hostCopies(
    copier,
    c.segs.map((s) => base + s.at),
    c.segs.map((s) => s.host),
    c.segs,
  );
}

/** The host threads empty the chunk's slot into host memory (a scatter) or into the file. */
export function drainChunk(host: FlowHost, c: Chunk): Promise<void> {
  const copier = host.copier();
  const base = c.slot ? c.slot.memory.address : 0;
  if (c.mode === 'file') {
    const s = c.segs[0]!;
    const f = s.job.file!;
    return copier.writeFile ? copier.writeFile(f.fd, base + s.at, s.bytes, s.host) : host.writeFrom(f.fd, base + s.at, s.bytes, s.host);
  }
  if (c.mode === 'direct') return Promise.resolve();
  return hostCopies(
    copier,
    c.segs.map((s) => s.host),
    c.segs.map((s) => base + s.at),
    c.segs,
  );
}

function hostCopies(copier: HostCopier, dsts: number[], srcs: number[], segs: readonly Segment[]): Promise<void> {
  const gone = detached(segs);
  if (gone) return Promise.reject(gone);
  const sizes = segs.map((s) => s.bytes);
  let done: Promise<void>;
  if (segs.length === 1) done = copier.copy(dsts[0]!, srcs[0]!, sizes[0]!);
  else if (copier.copyMany) done = copier.copyMany(dsts, srcs, sizes);
  else done = Promise.all(segs.map((s, i) => copier.copy(dsts[i]!, srcs[i]!, s.bytes))).then(() => {});
  // A buffer detached while the copy was queued: the copier's own failure (a TypeError on the host backend) says less.
  return done.catch((e: unknown) => {
    throw detached(segs) ?? e;
  });
}

/**
 * The error for a chunk whose JS buffer was detached (transferred to a worker, `structuredClone` with `transfer`)
 * while its transfer was in flight: its memory is no longer the program's to read or write. Undefined otherwise.
 */
function detached(segs: readonly Segment[]): GpuError | undefined {
  for (const s of segs) {
    const buffer = s.key instanceof ArrayBuffer ? s.key : s.key instanceof PageableAllocation ? s.key.buffer : undefined;
    if (buffer && buffer.byteLength === 0) {
      const what = s.job.direction === 'upload' ? 'source' : 'destination';
      return new GpuError(ErrorCode.INVALID_STATE, `${s.job.direction}: the ${what} ArrayBuffer was detached while the transfer was in flight`);
    }
  }
  return undefined;
}

/** A chunk's host spans per buffer (offsets from the buffer's start; file offsets for a file). */
export function spansOf(c: Chunk): Map<object | string, [number, number]> {
  const spans = new Map<object | string, [number, number]>();
  if (c.mode === 'file') {
    spans.set(c.segs[0]!.job.file!.key, [c.fileStart, c.fileStart + c.fileBytes]);
    return spans;
  }
  for (const s of c.segs) {
    const at = s.host - s.keyBase;
    const span = spans.get(s.key);
    if (span) {
      span[0] = Math.min(span[0], at);
      span[1] = Math.max(span[1], at + s.bytes);
    } else spans.set(s.key, [at, at + s.bytes]);
  }
  return spans;
}

/** A batch of the chunk's copies for the runtime's batch call (one run: host to device, or device to host). */
export function packBatch(pairs: ReadonlyArray<[number, number]>, segs: readonly Segment[], up: boolean, device: number): NativeCopyBatch {
  const n = pairs.length;
  const dsts = new Uint32Array(2 * n);
  const srcs = new Uint32Array(2 * n);
  const sizes = new Uint32Array(2 * n);
  const U32 = 2 ** 32;
  for (let i = 0; i < n; i++) {
    const [d, s] = pairs[i]!;
    const z = segs[i]!.bytes;
    dsts[2 * i] = d % U32;
    dsts[2 * i + 1] = (d / U32) >>> 0;
    srcs[2 * i] = s % U32;
    srcs[2 * i + 1] = (s / U32) >>> 0;
    sizes[2 * i] = z % U32;
    sizes[2 * i + 1] = (z / U32) >>> 0;
  }
  const dev = { type: 'device' as const, device };
  const host = { type: 'host' as const };
  return { count: n, dsts, srcs, sizes, runs: [{ first: 0, src: up ? host : dev, dst: up ? dev : host }] };
}

export function chunkBytesOf(segs: readonly Segment[]): number {
  let n = 0;
  for (const s of segs) n += s.bytes;
  return n;
}
