/**
 * The pinned ring of a stager: up to `depth` slots of `chunkBytes` pinned host memory, each with the event its last
 * device copy recorded. Slots are pinned one at a time as they are first needed, so that a first transfer starts
 * moving bytes after one slot's pinning instead of the whole ring's (pinning costs about as much per byte as the
 * copy itself); `warm()` pins the rest on idle turns of the event loop, one slot per turn.
 */
import type { MemoryRuntime } from '../memory/runtime.js';
import type { PinnedAllocation } from '../memory/allocation.js';
import type { GpuEvent } from '../stream/event.js';

/** One chunk's worth of pinned memory and the event of the device copy that last used it. */
export interface Slot {
  readonly index: number;
  readonly memory: PinnedAllocation;
  readonly event: GpuEvent;
}

export class Ring {
  private readonly slots: Slot[] = [];
  private readonly free: Slot[] = [];
  private readonly waiting: Array<(s: Slot) => void> = [];
  private warming = false;
  private closed = false;

  constructor(
    private readonly rt: MemoryRuntime,
    private readonly device: number,
    readonly chunkBytes: number,
    readonly depth: number,
    private readonly numaNode: number | undefined,
  ) {}

  /** Slots pinned so far. */
  get size(): number {
    return this.slots.length;
  }

  /** A free slot: one released earlier, else a new one pinned now while the ring is below its depth, else the next released. */
  acquire(): Slot | Promise<Slot> {
    const s = this.free.pop();
    if (s) return s;
    if (this.slots.length < this.depth) return this.grow();
    return new Promise<Slot>((resolve) => this.waiting.push(resolve));
  }

  /** A free slot now (pinning a new one while the ring is below its depth), or undefined when every slot is in use. */
  tryAcquire(): Slot | undefined {
    return this.free.pop() ?? (this.slots.length < this.depth ? this.grow() : undefined);
  }

  /** Gives a slot back once the work that used it is over. */
  release(s: Slot): void {
    if (this.closed) return;
    const w = this.waiting.shift();
    if (w) w(s);
    else this.free.push(s);
  }

  /** Pins the remaining slots in the background, one per turn of the event loop. */
  warm(): void {
    if (this.warming || this.closed) return;
    this.warming = true;
    const step = (): void => {
      if (this.closed || this.slots.length >= this.depth) {
        this.warming = false;
        return;
      }
      try {
        this.release(this.grow());
      } catch {
        // pinning failed (memory locked out, runtime going away): the ring grows on demand later, or reports it then
        this.warming = false;
        return;
      }
      setImmediate(step).unref();
    };
    setImmediate(step).unref();
  }

  private grow(): Slot {
    const memory = this.rt.allocPinned(this.chunkBytes, this.numaNode === undefined ? {} : { numaNode: this.numaNode });
    let event: GpuEvent;
    try {
      // Blocking-sync events: a wait sleeps instead of spinning a core the copy threads need.
      event = this.rt.device(this.device).createEvent({ timing: false, blockingSync: true });
    } catch (e) {
      memory.forceFree();
      throw e;
    }
    const s: Slot = { index: this.slots.length, memory, event };
    this.slots.push(s);
    return s;
  }

  /** Frees every slot (the caller has waited for the work on them). */
  dispose(): void {
    this.closed = true;
    this.waiting.length = 0;
    for (const s of this.slots) {
      s.event[Symbol.dispose]();
      if (!s.memory.disposed) s.memory.forceFree();
    }
    this.slots.length = 0;
    this.free.length = 0;
  }
}
