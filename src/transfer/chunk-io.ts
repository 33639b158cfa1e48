/**
 * A chunk's host work (the threads fill its slot from host memory or a file, or drain it back) and the pieces that
 * describe it to the runtime's batch call and to the hazard check. See flow.ts.
 */
import type { HostCopier, NativeCopyBatch } from '../backend/backend.js';
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
  if (segs.length === 1) return copier.copy(dsts[0]!, srcs[0]!, segs[0]!.bytes);
  const sizes = segs.map((s) => s.bytes);
  if (copier.copyMany) return copier.copyMany(dsts, srcs, sizes);
  return Promise.all(sizes.map((n, i) => copier.copy(dsts[i]!, srcs[i]!, n))).then(() => {});
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
