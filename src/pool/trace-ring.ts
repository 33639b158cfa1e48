/**
 * A fixed-size ring of allocator events (alloc, free_requested, free_completed, segment_alloc, segment_free, oom),
 * kept in typed arrays so that recording allocates nothing. Read out in PyTorch's device_traces shape.
 */

export const TRACE_ACTIONS = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'oom', 'segment_map', 'segment_unmap'] as const;
export type TraceAction = (typeof TRACE_ACTIONS)[number];
const ACTION_INDEX = Object.fromEntries(TRACE_ACTIONS.map((a, i) => [a, i])) as Record<TraceAction, number>;

/** One event, as PyTorch's snapshot writes it. */
export interface TraceEntry {
  action: TraceAction;
  addr: number;
  size: number;
  stream: number;
  time_us: number;
}

export class TraceRing {
  private readonly action: Uint8Array;
  private readonly addr: Float64Array;
  private readonly size: Float64Array;
  private readonly stream: Float64Array;
  private readonly time: Float64Array;
  private head = 0;
  private count = 0;
  /** Events dropped because the ring was full. */
  dropped = 0;

  constructor(readonly capacity: number) {
    this.action = new Uint8Array(capacity);
    this.addr = new Float64Array(capacity);
    this.size = new Float64Array(capacity);
    this.stream = new Float64Array(capacity);
    this.time = new Float64Array(capacity);
  }

  /** Microseconds since the epoch, as PyTorch's time_us (timeOrigin read once: its getter costs as much as now()). */
  private readonly originUs = performance.timeOrigin * 1000;

  /**
   * Records one event at `timeUs` (default: now) and answers the time used, so that events of one call can share
   * one clock read (a clock read is most of what recording costs).
   */
  record(action: TraceAction, addr: number, size: number, stream: number, timeUs = -1): number {
    if (this.capacity === 0) return 0;
    const t = timeUs >= 0 ? timeUs : this.originUs + performance.now() * 1000;
    const i = this.head;
    this.action[i] = ACTION_INDEX[action];
    this.addr[i] = addr;
    this.size[i] = size;
    this.stream[i] = stream;
    this.time[i] = t;
    this.head = i + 1 === this.capacity ? 0 : i + 1;
    if (this.count < this.capacity) this.count++;
    else this.dropped++;
    return t;
  }

  /** The events, oldest first. */
  entries(): TraceEntry[] {
    const out: TraceEntry[] = [];
    const start = (this.head - this.count + this.capacity) % Math.max(1, this.capacity);
    for (let k = 0; k < this.count; k++) {
      const i = (start + k) % this.capacity;
      out.push({
        action: TRACE_ACTIONS[this.action[i]!]!,
        addr: this.addr[i]!,
        size: this.size[i]!,
        stream: this.stream[i]!,
        time_us: Math.round(this.time[i]!),
      });
    }
    return out;
  }

  clear(): void {
    this.head = 0;
    this.count = 0;
  }
}
