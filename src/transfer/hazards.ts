/**
 * Host ranges in use by a stager's chunks, so that transfers queued together touch a buffer (an ArrayBuffer, an
 * allocation, or a file by device and inode) in the order they were asked for. A chunk that writes host memory
 * (a download's drain) waits for every earlier chunk still reading host memory, and for earlier writers of an
 * overlapping range; a chunk that reads (an upload's fill) waits for earlier writers of an overlapping range. Reads
 * are not tracked by range (a write waits for all of them).
 *
 * Tracking is per chunk: a chunk registers once and is forgotten once; its spans (one per run of its segments in one
 * buffer) are computed only when another chunk is checked against it. Two chunks that carry the same one transfer are
 * not checked against each other: the items of one list land in no set order among themselves (as the copies of a
 * batch, and as the segments of one chunk, which the copier's threads gather in parallel), so a list of 16384 arrays
 * pays nothing here per array. Only a chunk with another transfer's writes in flight looks buffers up: then the
 * writing chunks in flight are indexed by buffer (each once, when first needed) and the chunk does one lookup per
 * buffer. Entries of finished chunks are skipped when met and dropped in bulk: all at once when no indexed chunk is
 * left, else when they outnumber the live ones (so the index keeps at most a few thousand finished buffers alive).
 */

/** A chunk's host spans: `keys[i]` (a buffer or a file) from `starts[i]` to `ends[i]`, for i < count. A key may recur. */
export interface HostSpans {
  count: number;
  keys: Array<object | string>;
  starts: Float64Array;
  ends: Float64Array;
}

/** A chunk's use of host memory, from {@link HostHazards.register} until {@link HostHazards.unregister}. */
export interface HostOp {
  readonly write: boolean;
  /** The one transfer the chunk carries, or undefined when it carries several. */
  readonly owner: object | undefined;
  /** Settles when the chunk's host work is over (set by the caller once it knows that work). */
  done: Promise<void>;
  /** False once unregistered (its index entries are then stale). */
  live: boolean;
  /** The spans, computed on first use. */
  spans: HostSpans | undefined;
  readonly spansOf: () => HostSpans;
  /** Entered in the index of writers. */
  indexed: boolean;
}

/** The ops writing a buffer: one, or several (no array for the common case of one chunk per buffer). */
type Writers = HostOp | HostOp[];

/** Stale index entries tolerated beyond twice the live ones before a sweep (a sweep is one pass over the index). */
const STALE_SLACK = 4096;
const RESOLVED: Promise<void> = Promise.resolve();

export class HostHazards {
  /** Writing chunks registered and not yet unregistered, oldest first. */
  private readonly writers: HostOp[] = [];
  private readonly reads = new Set<HostOp>();
  /** Writers by buffer, for the writers entered (entries of unregistered ones linger until a sweep). */
  private readonly index = new Map<object | string, Writers>();
  private indexedLive = 0;
  private indexedSpans = 0;

  /**
   * Registers a chunk's host use (its spans, from `spans`, computed only when they matter) and adds to `deps` the
   * `done` of every earlier use it must wait for. Set the op's `done` once the chunk's host work is known, and
   * unregister it as soon as that work is over (before the chunk's segments are reused).
   */
  register(spans: () => HostSpans, write: boolean, owner: object | undefined, deps: Array<Promise<void>>): HostOp {
    const op: HostOp = { write, owner, done: RESOLVED, live: true, spans: undefined, spansOf: spans, indexed: false };
    if (write) for (const r of this.reads) deps.push(r.done);
    if (this.foreignWriters(owner)) {
      for (const w of this.writers) if (!w.indexed) this.enter(w);
      const s = this.spansOf(op);
      for (let i = 0; i < s.count; i++) {
        const w = this.index.get(s.keys[i]!);
        if (w !== undefined) this.conflictsWith(w, s.keys[i]!, s.starts[i]!, s.ends[i]!, owner, deps);
      }
    }
    if (write) this.writers.push(op);
    else this.reads.add(op);
    return op;
  }

  /** Forgets a chunk's use once its host work is over. */
  unregister(op: HostOp): void {
    if (!op.live) return;
    op.live = false;
    if (!op.write) {
      this.reads.delete(op);
      return;
    }
    const at = this.writers.indexOf(op);
    if (at >= 0) this.writers.splice(at, 1);
    if (!op.indexed) return;
    this.indexedSpans -= op.spans!.count;
    if (--this.indexedLive === 0) this.index.clear();
    else if (this.index.size > 2 * this.indexedSpans + STALE_SLACK) this.sweep();
  }

  /** True when a writer in flight carries a transfer other than `owner` (alone). */
  private foreignWriters(owner: object | undefined): boolean {
    for (const w of this.writers) if (owner === undefined || w.owner !== owner) return true;
    return false;
  }

  private spansOf(op: HostOp): HostSpans {
    op.spans ??= op.spansOf();
    return op.spans;
  }

  /** Enters a live writer in the index, one entry per span. */
  private enter(op: HostOp): void {
    const s = this.spansOf(op);
    op.indexed = true;
    this.indexedLive++;
    this.indexedSpans += s.count;
    for (let i = 0; i < s.count; i++) {
      const key = s.keys[i]!;
      const w = this.index.get(key);
      if (w === undefined || (!Array.isArray(w) && !w.live)) this.index.set(key, op);
      else if (Array.isArray(w)) {
        if (w[w.length - 1] !== op) w.push(op);
      } else if (w !== op) this.index.set(key, [w, op]);
    }
  }

  /**
   * Adds the live writers `w` of `key` that overlap [start, end), leaving out the chunks of the same one transfer as
   * `owner`; an array loses its finished writers on the way.
   */
  private conflictsWith(w: Writers, key: object | string, start: number, end: number, owner: object | undefined, deps: Array<Promise<void>>): void {
    if (!Array.isArray(w)) {
      if (w.live && (owner === undefined || w.owner !== owner) && overlaps(w.spans!, key, start, end)) deps.push(w.done);
      return;
    }
    let n = 0;
    for (let j = 0; j < w.length; j++) {
      const o = w[j]!;
      if (!o.live) continue;
      w[n++] = o;
      if ((owner === undefined || o.owner !== owner) && overlaps(o.spans!, key, start, end)) deps.push(o.done);
    }
    w.length = n;
  }

  /** Drops the index entries of unregistered writers. */
  private sweep(): void {
    for (const [key, w] of this.index) {
      if (!Array.isArray(w)) {
        if (!w.live) this.index.delete(key);
        continue;
      }
      let n = 0;
      for (const o of w) if (o.live) w[n++] = o;
      w.length = n;
      if (n === 0) this.index.delete(key);
      else if (n === 1) this.index.set(key, w[0]!);
    }
  }
}

function overlaps(s: HostSpans, key: object | string, start: number, end: number): boolean {
  for (let i = 0; i < s.count; i++) if (s.keys[i] === key && s.starts[i]! < end && start < s.ends[i]!) return true;
  return false;
}
