/**
 * The pinned ring of a stager: up to `depth` slots of `chunkBytes` pinned host memory, each with the event its last
 * device copy recorded. Pinning costs about as much per byte as copying (more where the memory is fresh: 5.5 ms for
 * 8 MiB on the H200 machines), so the ring never pins all at once on the JS thread: the first slot is pinned when a
 * transfer first needs one and the transfer starts with it; the others are pinned on the host copier's threads
 * (`pin`), in parallel with whatever the JS thread does, and join the ring as they arrive. `warm()` starts that
 * before any transfer. Without threads that can pin, the ring grows one slot at a time when a transfer finds every
 * slot busy, and `warm()` pins on idle turns of the event loop.
 *
 * Who owns what: every field here belongs to the JS thread; no other thread reads or writes it. The copier's
 * threads only allocate the memory of a pending pin (asked of them, not answered yet: `pendingPins` counts them);
 * the address comes back through the copier's answer, on the JS thread (`landed`), which makes the slot. A slot is
 * the flow's from `acquire` until `release`: the copier's threads touch its memory only inside a request the flow
 * posted for it (a fill, a drain, a file read), and the device only inside the copy whose event the slot keeps.
 */
import { PinnedAllocation, vouch } from '../memory/allocation.js';
import type { MemoryRuntime } from '../memory/runtime.js';
import type { GpuEvent } from '../stream/event.js';

/**
 * Pins memory on other threads: `landed` runs on the JS thread when an allocation arrives, and `poll` makes the
 * threads' finished answers arrive now (a transfer that finds no free slot need not wait a turn for slots pinned
 * long ago while the program ran).
 */
export interface Pinner {
  pin(bytes: number, landed: (address: number) => void): Promise<number>;
  poll(): void;
}

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
  /** Slots being pinned on the copier's threads. */
  private pendingPins = 0;

  constructor(
    private readonly rt: MemoryRuntime,
    private readonly device: number,
    readonly chunkBytes: number,
    readonly depth: number,
    private readonly numaNode: number | undefined,
    /** Pins memory on other threads, where that can be done (answers undefined where not). */
    private readonly pinner: () => Pinner | undefined = () => undefined,
  ) {}

  /** Slots pinned so far. */
  get size(): number {
    return this.slots.length;
  }

  /**
   * A free slot: one released earlier; else, with no slot at all, one pinned now; else the next to be released or to
   * arrive from the threads (pinning more there while the ring is below its depth), or pinned now without threads.
   */
  acquire(): Slot | Promise<Slot> {
    const s = this.tryAcquire();
    if (s) return s;
    if (this.pendingPins === 0 && this.slots.length < this.depth) return this.grow();
    return new Promise<Slot>((resolve) => this.waiting.push(resolve));
  }

  /** A free slot now (the ring's first slot is pinned here), or undefined; more are pinned on the threads meanwhile. */
  tryAcquire(): Slot | undefined {
    let s = this.free.pop();
    if (s) return s;
    if (this.slots.length + this.pendingPins === 0) return this.grow();
    if (this.pendingPins > 0 && this.numaNode === undefined) {
      this.pinner()?.poll();
      s = this.free.pop();
      if (s) return s;
    }
    this.pinMore();
    return undefined;
  }

  /** Starts pinning the missing slots on the copier's threads, where they can pin. */
  private pinMore(): void {
    const pinner = this.numaNode === undefined && !this.closed ? this.pinner() : undefined;
    if (!pinner) return;
    while (this.slots.length + this.pendingPins < this.depth) {
      this.pendingPins++;
      pinner
        .pin(this.chunkBytes, (address) => {
          this.pendingPins--;
          this.landed(address);
        })
        .catch(() => {
          // the thread could not pin (locked-memory limit): the ring grows on the JS thread when it needs to
          this.pendingPins--;
        });
    }
  }

  /** A slot pinned on a thread arrives (called on the JS thread, from the copier's wait or a poll). */
  private landed(address: number): void {
    if (this.closed) {
      // The ring went away meanwhile (the runtime's disposal waits for the threads, then this lands): give the
      // memory back; the runtime library stays loaded after the backend object is disposed.
      try {
        this.rt.backend.hostFree(address);
      } catch {
        // a sticky device error made the backend unusable: the process's exit gives the memory back
      }
      return;
    }
    try {
      const memory = vouch(new PinnedAllocation(this.rt, 'pinned', address, this.chunkBytes, undefined, { portable: true }));
      this.release(this.slotOf(memory));
    } catch {
      // the runtime went away meanwhile: its disposal freed what it had adopted
    }
  }

  /** Gives a slot back once the work that used it is over. */
  release(s: Slot): void {
    if (this.closed) return;
    const w = this.waiting.shift();
    if (w) w(s);
    else this.free.push(s);
  }

  /** Pins the remaining slots in the background: on the copier's threads, else one per turn of the event loop. */
  warm(): void {
    if (this.warming || this.closed) return;
    if (this.numaNode === undefined && this.pinner()) {
      this.pinMore();
      return;
    }
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
    // The ring is the engine's own memory, not the program's: it is not counted in liveMemory(), and the stager
    // frees it (before the runtime frees what the program left).
    this.rt.forget(memory);
    return this.slotOf(memory);
  }

  private slotOf(memory: PinnedAllocation): Slot {
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
