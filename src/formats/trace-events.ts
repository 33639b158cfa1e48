/** Allocation-trace events in columns, and the extents (blocks, segments) a trace's state is made of. */

/** Event kinds kept for replay. */
export const enum EventKind {
  Alloc = 0,
  Free = 1,
  SegmentAlloc = 2,
  SegmentFree = 3,
  SegmentMap = 4,
  SegmentUnmap = 5,
  Oom = 6,
  FreeRequested = 7,
}

/**
 * Events in columns (typed arrays grow as needed): a million events cost 33 MB, not a million objects. `time` is in
 * microseconds as the trace wrote it (NaN where it wrote none); `stack` indexes the reader's table of stack traces
 * (-1: none kept).
 */
export class TraceEvents {
  kind = new Uint8Array(1024);
  addr = new Float64Array(1024);
  size = new Float64Array(1024);
  stream = new Float64Array(1024);
  time = new Float64Array(1024);
  stack = new Int32Array(1024);
  length = 0;

  push(kind: EventKind, addr: number, size: number, stream: number, time = Number.NaN, stack = -1): void {
    if (this.length === this.kind.length) this.growTo(this.length * 2);
    const i = this.length++;
    this.kind[i] = kind;
    this.addr[i] = addr;
    this.size[i] = size;
    this.stream[i] = stream;
    this.time[i] = time;
    this.stack[i] = stack;
  }

  private growTo(n: number): void {
    const k = new Uint8Array(n);
    k.set(this.kind);
    this.kind = k;
    const s = new Int32Array(n);
    s.set(this.stack);
    this.stack = s;
    for (const f of ['addr', 'size', 'stream', 'time'] as const) {
      const a = new Float64Array(n);
      a.set(this[f]);
      this[f] = a;
    }
  }

  count(kind: EventKind): number {
    let n = 0;
    for (let i = 0; i < this.length; i++) if (this.kind[i] === kind) n++;
    return n;
  }
}

/** A block or segment of memory: its address, bytes and stream. */
export interface Extent {
  address: number;
  size: number;
  stream: number;
}
