/**
 * Host ranges in use by a stager's chunks, so that transfers queued together touch a buffer (an ArrayBuffer, an
 * allocation, or a file by device and inode) in the order they were asked for. A chunk that writes host memory
 * (a download's drain) waits for every earlier chunk still reading host memory, and for earlier writers of an
 * overlapping range; a chunk that reads (an upload's fill) waits for earlier writers of an overlapping range. Reads
 * are not tracked by range (a write waits for all of them): uploads, the common case, cost one lookup per buffer,
 * and only while downloads are in flight.
 */

/** A chunk's host spans: `keys[i]` (a buffer or a file) from `starts[i]` to `ends[i]`. A key may appear more than once. */
export interface HostSpans {
  keys: Array<object | string>;
  starts: number[];
  ends: number[];
}

/** A chunk's use of host memory, until `done` settles. */
export interface HostOp {
  /** The spans it writes (undefined for a read). */
  writes: HostSpans | undefined;
  done: Promise<void>;
}

/** The ops writing a buffer: one, or several (no array for the common case of one chunk per buffer). */
type Writers = HostOp | HostOp[];

export class HostHazards {
  private readonly writes = new Map<object | string, Writers>();
  private readonly reads = new Set<HostOp>();

  /**
   * Registers a chunk's host use (its spans, from `spans`, computed only when they matter) and adds to `deps` the
   * `done` of every earlier use it must wait for. Set the op's `done` once the chunk's host work is known.
   */
  register(spans: () => HostSpans, write: boolean, deps: Array<Promise<void>>): HostOp {
    if (!write) {
      const op: HostOp = { writes: undefined, done: Promise.resolve() };
      if (this.writes.size > 0) {
        const s = spans();
        for (let i = 0; i < s.keys.length; i++) this.conflicts(s.keys[i]!, s.starts[i]!, s.ends[i]!, deps);
      }
      this.reads.add(op);
      return op;
    }
    const s = spans();
    const op: HostOp = { writes: s, done: Promise.resolve() };
    for (const r of this.reads) deps.push(r.done);
    for (let i = 0; i < s.keys.length; i++) {
      // One lookup per span: the buffer's earlier writers are checked and this op joins them.
      const key = s.keys[i]!;
      const w = this.writes.get(key);
      if (w === undefined) {
        this.writes.set(key, op);
        continue;
      }
      this.conflictsWith(w, key, s.starts[i]!, s.ends[i]!, deps, op);
      if (Array.isArray(w)) w.push(op);
      else if (w !== op) this.writes.set(key, [w, op]);
    }
    return op;
  }

  private conflicts(key: object | string, start: number, end: number, deps: Array<Promise<void>>): void {
    const w = this.writes.get(key);
    if (w !== undefined) this.conflictsWith(w, key, start, end, deps);
  }

  /** Adds the earlier writers `w` of `key` that overlap [start, end) (an op's own spans never count: a key may recur in them). */
  private conflictsWith(w: Writers, key: object | string, start: number, end: number, deps: Array<Promise<void>>, self?: HostOp): void {
    if (Array.isArray(w)) {
      for (const o of w) if (o !== self && overlaps(o, key, start, end)) deps.push(o.done);
    } else if (w !== self && overlaps(w, key, start, end)) deps.push(w.done);
  }

  /** Forgets a chunk's use once its host work is over. */
  unregister(op: HostOp): void {
    const s = op.writes;
    if (s === undefined) {
      this.reads.delete(op);
      return;
    }
    for (const key of s.keys) {
      const w = this.writes.get(key);
      if (w === op) this.writes.delete(key);
      else if (Array.isArray(w)) {
        const at = w.indexOf(op);
        if (at >= 0) w.splice(at, 1);
        if (w.length === 1) this.writes.set(key, w[0]!);
        else if (w.length === 0) this.writes.delete(key);
      }
    }
  }
}

function overlaps(o: HostOp, key: object | string, start: number, end: number): boolean {
  const s = o.writes!;
  for (let i = 0; i < s.keys.length; i++) if (s.keys[i] === key && s.starts[i]! < end && start < s.ends[i]!) return true;
  return false;
}
