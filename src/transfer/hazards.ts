/**
 * Host ranges in use by a stager's chunks, per buffer (an ArrayBuffer, an allocation, or a file by device and inode):
 * a chunk that writes a range waits for earlier chunks still reading or writing it, one that reads waits for earlier
 * writers. Ranges are registered in chunk order, so every range found is an earlier chunk's.
 */

/** A range of one buffer in use by a chunk until `done` settles. */
export interface HostOp {
  key: object | string;
  start: number;
  end: number;
  write: boolean;
  done: Promise<void>;
}

export class HostHazards {
  private readonly ops = new Map<object | string, HostOp[]>();

  /**
   * Registers a chunk's spans (per buffer, offsets from the buffer's start) and adds to `deps` the `done` of every
   * earlier range it conflicts with. Set each returned op's `done` once the chunk's host work is known.
   */
  register(spans: ReadonlyMap<object | string, readonly [number, number]>, write: boolean, deps: Array<Promise<void>>): HostOp[] {
    const out: HostOp[] = [];
    for (const [key, [start, end]] of spans) {
      const list = this.ops.get(key);
      if (list) {
        for (const o of list) if ((write || o.write) && o.start < end && start < o.end) deps.push(o.done);
      }
      const op: HostOp = { key, start, end, write, done: Promise.resolve() };
      if (list) list.push(op);
      else this.ops.set(key, [op]);
      out.push(op);
    }
    return out;
  }

  /** Forgets ranges whose host work is over. */
  unregister(ops: readonly HostOp[]): void {
    for (const op of ops) {
      const list = this.ops.get(op.key);
      if (!list) continue;
      const at = list.indexOf(op);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) this.ops.delete(op.key);
    }
  }
}
