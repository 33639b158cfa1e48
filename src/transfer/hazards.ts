/**
 * Host ranges in use by a stager's chunks, so that transfers queued together touch a buffer (an ArrayBuffer, an
 * allocation, or a file by device and inode) in the order they were asked for. A chunk that writes host memory
 * (a download's drain) waits for every earlier chunk still reading host memory, and for earlier writers of an
 * overlapping range; a chunk that reads (an upload's fill) waits for earlier writers of an overlapping range. Reads
 * are not tracked by range (a write waits for all of them): uploads, the common case, cost one lookup per buffer,
 * and only while downloads are in flight.
 */

/** A chunk's use of host memory, until `done` settles. */
export interface HostOp {
  /** The ranges it writes, per buffer (empty for a read). */
  writes: Array<{ key: object | string; start: number; end: number }>;
  done: Promise<void>;
}

export class HostHazards {
  private readonly writes = new Map<object | string, HostOp[]>();
  private readonly reads = new Set<HostOp>();

  /**
   * Registers a chunk's host use (its spans per buffer, from `spans`, computed only when they matter) and adds to
   * `deps` the `done` of every earlier use it must wait for. Set the op's `done` once the chunk's host work is known.
   */
  register(spans: () => ReadonlyMap<object | string, readonly [number, number]>, write: boolean, deps: Array<Promise<void>>): HostOp {
    const op: HostOp = { writes: [], done: Promise.resolve() };
    if (!write) {
      if (this.writes.size > 0) for (const [key, [start, end]] of spans()) this.conflicts(key, start, end, deps);
      this.reads.add(op);
      return op;
    }
    for (const r of this.reads) deps.push(r.done);
    for (const [key, [start, end]] of spans()) {
      this.conflicts(key, start, end, deps);
      op.writes.push({ key, start, end });
      const list = this.writes.get(key);
      if (list) list.push(op);
      else this.writes.set(key, [op]);
    }
    return op;
  }

  private conflicts(key: object | string, start: number, end: number, deps: Array<Promise<void>>): void {
    const list = this.writes.get(key);
    if (!list) return;
    for (const o of list) for (const w of o.writes) if (w.key === key && w.start < end && start < w.end) deps.push(o.done);
  }

  /** Forgets a chunk's use once its host work is over. */
  unregister(op: HostOp): void {
    if (op.writes.length === 0) {
      this.reads.delete(op);
      return;
    }
    for (const w of op.writes) {
      const list = this.writes.get(w.key);
      if (!list) continue;
      const at = list.indexOf(op);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) this.writes.delete(w.key);
    }
  }
}
