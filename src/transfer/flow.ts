/**
 * The engine of a stager: every transfer queued on it is cut into pieces that flow through the pinned ring in the
 * order they were asked for, without the ring draining between transfers. Pieces are packed into chunks: one slot of
 * the ring, filled by the host threads (a gather of many small sources, or a file read) and landed with one device
 * copy, a batched copy when the chunk holds several pieces; downloads the other way round. Chunks go to the device in
 * order (a later transfer to the same memory lands after an earlier one) and their completions are waited for in
 * order, one waiting thread at a time.
 *
 *   upload chunk:   [hazards] -> fill slot (threads) -> device copy (in chunk order) -> event -> slot free
 *   download chunk: device copy (in chunk order) -> event -> [hazards] -> drain slot (threads) -> slot free
 *
 * Host ranges are tracked per buffer while chunks use them, so that a download into a buffer waits for an earlier
 * upload still reading it (and the reverse); device ranges are ordered by the stream. A failing chunk fails the
 * transfers it carries; the others go on, and the ring is whole again once the chunks in flight have settled.
 */
import { ErrorCode, GpuError } from '../errors.js';
import { CopyKind } from '../backend/backend.js';
import type { Stream } from '../stream/stream.js';
import type { GpuEvent } from '../stream/event.js';
import type { Slot } from './ring.js';
import type { Chunk, FlowHost, Job, Piece, Segment } from './flow-types.js';

export type { Chunk, FlowHost, Job, JobMode, Piece, Segment } from './flow-types.js';
import { chunkBytesOf, drainChunk, fillChunk, packBatch, spansOf } from './chunk-io.js';
import { HostHazards } from './hazards.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Most pieces in one chunk (one batched copy, one gather on the threads). */
const MAX_SEGMENTS = 512;
/** Smallest chunk the engine cuts when little is queued (smaller chunks overlap the fill with the copy sooner). */
const MIN_CHUNK = MiB;
/** File chunks start at file offsets aligned to this (O_DIRECT needs it; buffered reads do not mind). */
export const FILE_ALIGN = 4096;

export class Flow {
  private queue: Piece[] = [];
  private head = 0;
  private queuedBytes = 0;
  /** A drive runs (it may be waiting for a slot). */
  private pumping = false;
  /** A drive is due at the end of this turn. */
  private scheduled = false;
  private dmaChain: Promise<unknown> = Promise.resolve();
  private readonly completions = new Completions();
  private lastStream: Stream | undefined;
  private readonly hazards = new HostHazards();
  /** Chunks started and not settled, and their bytes. */
  private live = 0;
  private flightBytes = 0;
  private idleWaiters: Array<() => void> = [];
  /** Chunks started since the stager was made (a list of small transfers packs into few). */
  chunksStarted = 0;
  /** @internal Test hook: awaited before each chunk's device copy is enqueued (holds a transfer at a known point). */
  beforeDeviceCopy: ((chunk: { bytes: number; direction: string }) => Promise<void> | void) | undefined;

  constructor(private readonly host: FlowHost) {}

  /** Bytes queued and not yet in a chunk. */
  get pending(): number {
    return this.queuedBytes;
  }

  /** True while nothing is queued or in flight. */
  get idle(): boolean {
    return this.head >= this.queue.length && this.live === 0;
  }

  /** Resolves when nothing is queued or in flight. */
  drained(): Promise<void> {
    return this.idle ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }

  /**
   * Queues a transfer's pieces; they start once the engine reaches them. Whole chunks' worth of staged pieces start
   * at once while a slot is free, so that the threads copy while a program is still making its calls (4096 calls of
   * rt.upload in a row); what is left waits for the end of the current turn, to be packed with what comes next.
   */
  submit(pieces: readonly Piece[]): void {
    for (const p of pieces) {
      this.queue.push(p);
      this.queuedBytes += p.bytes;
    }
    if (!this.pumping) {
      const ring = this.host.ring;
      for (let p = this.peek(); p && p.job.mode === 'staged' && this.queuedBytes >= ring.chunkBytes; p = this.peek()) {
        let slot: Slot | undefined;
        try {
          slot = ring.tryAcquire();
        } catch {
          break; // pinning failed: the engine reports it when it reaches the piece
        }
        if (!slot) break;
        const chunk = this.assemble(slot);
        if (!chunk) {
          ring.release(slot);
          break;
        }
        this.start(chunk);
      }
    }
    this.pump();
  }

  private pump(): void {
    if (this.scheduled || this.head >= this.queue.length) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      if (!this.pumping) void this.drive();
    });
  }

  /** Builds chunks while pieces are queued, waiting for a ring slot when every slot is in use. */
  private async drive(): Promise<void> {
    this.pumping = true;
    try {
      for (;;) {
        const p = this.peek();
        if (!p) break;
        const needsSlot = p.job.mode !== 'direct';
        let slot: Slot | undefined;
        if (needsSlot) {
          const s = this.host.ring.acquire();
          slot = s instanceof Promise ? await s : s;
        }
        const chunk = this.assemble(slot);
        if (!chunk) {
          if (slot) this.host.ring.release(slot);
          continue;
        }
        this.start(chunk);
      }
    } catch (e) {
      // No slot could be pinned (or an event made): every transfer still queued fails with it.
      for (let p = this.peek(); p; p = this.peek()) {
        this.fail(p.job, e);
        this.drop();
      }
    } finally {
      this.pumping = false;
      this.compact();
      if (this.head < this.queue.length) this.pump();
      else this.checkIdle();
    }
  }

  /** The first queued piece of a live transfer (pieces of failed or aborted transfers are dropped on the way). */
  private peek(): Piece | undefined {
    while (this.head < this.queue.length) {
      const p = this.queue[this.head]!;
      const j = p.job;
      if (j.failed === undefined && j.signal?.aborted) this.fail(j, aborted());
      if (j.failed === undefined) return p;
      this.drop();
    }
    return undefined;
  }

  private drop(): void {
    const p = this.queue[this.head++]!;
    this.queuedBytes -= p.bytes;
    this.maybeFinish(p.job);
  }

  private compact(): void {
    if (this.head > 0 && this.head >= this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * The next chunk from the queue's head. Little queued or in flight (a lone transfer of a few MiB): chunks are cut
   * smaller, down to 1 MiB, so that the copy of the first starts while the threads fill the next; a large transfer
   * keeps full chunks to its end (what is in flight counts).
   */
  private assemble(slot: Slot | undefined): Chunk | undefined {
    const first = this.peek();
    if (!first) return undefined;
    const job = first.job;
    if ((job.mode === 'direct') !== (slot === undefined)) return undefined;
    const ring = this.host.ring;
    const work = this.queuedBytes + this.flightBytes;
    const limit = Math.min(ring.chunkBytes, Math.max(MIN_CHUNK, Math.ceil(work / ring.depth / (64 * KiB)) * 64 * KiB));
    const segs: Segment[] = [];
    let used = 0;
    let fileStart = 0;
    let fileBytes = 0;
    if (job.mode === 'file') {
      // One piece per chunk, its slot read from an aligned file offset so that the next chunk starts aligned too.
      const lead = first.host % FILE_ALIGN;
      const take = Math.min(first.bytes, Math.max(FILE_ALIGN, Math.floor(limit / FILE_ALIGN) * FILE_ALIGN) - lead);
      fileStart = first.host - lead;
      fileBytes = Math.ceil((lead + take) / FILE_ALIGN) * FILE_ALIGN;
      segs.push({ job, host: first.host, dev: first.dev, bytes: take, managed: first.managed, pinned: true, key: first.key, keyBase: 0, at: lead });
      this.consume(first, take);
    } else {
      const cap = job.mode === 'staged' ? limit : Number.POSITIVE_INFINITY;
      for (let p: Piece | undefined = first; p && segs.length < MAX_SEGMENTS; p = this.peek()) {
        if (p.job.mode !== job.mode || p.job.direction !== job.direction || p.job.stream !== job.stream) break;
        const take = Math.min(p.bytes, cap - used);
        if (take <= 0) break;
        segs.push({
          job: p.job,
          host: p.host,
          dev: p.dev,
          bytes: take,
          managed: p.managed,
          pinned: job.mode !== 'direct' || p.pinned,
          key: p.key,
          keyBase: p.keyBase,
          at: used,
        });
        used += take;
        const whole = take === p.bytes;
        this.consume(p, take);
        if (!whole || (job.mode === 'direct' && used >= 256 * MiB)) break;
      }
    }
    const event = slot ? slot.event : this.host.takeEvent();
    const chunk: Chunk = {
      direction: job.direction,
      mode: job.mode,
      stream: job.stream,
      slot,
      event,
      segs,
      fileStart,
      fileBytes,
      deps: [],
      release: () => (slot ? this.host.ring.release(slot) : this.host.giveEvent(event)),
    };
    const jobs = new Set(segs.map((s) => s.job));
    for (const j of jobs) {
      j.chunks++;
      j.inFlight++;
    }
    this.live++;
    this.flightBytes += chunkBytesOf(segs);
    this.chunksStarted++;
    return chunk;
  }

  /** Takes `take` bytes off the front of a queued piece (the whole piece leaves the queue). */
  private consume(p: Piece, take: number): void {
    this.queuedBytes -= take;
    if (take === p.bytes) {
      this.head++;
      return;
    }
    p.host += take;
    p.dev += take;
    p.bytes -= take;
  }

  /** Runs a chunk's life: registers its host ranges now (in order), then fills, copies, waits and drains. */
  private start(c: Chunk): void {
    const reads = c.direction === 'upload';
    const op = this.hazards.register(() => spansOf(c), !reads, c.deps);
    let hostDone: () => void = () => {};
    const hostWork = new Promise<void>((r) => {
      hostDone = r;
    });
    op.done = hostWork;
    const deps = c.deps;
    let landed: Promise<void>;
    if (reads) {
      const filled = (deps.length ? Promise.all(deps) : Promise.resolve()).then(() => fillChunk(this.host, c));
      filled.then(hostDone, hostDone);
      const enqueued = this.dmaChain.then(() => filled).then(() => this.enqueue(c));
      this.dmaChain = enqueued.catch(() => {});
      landed = enqueued.then((ran) => (ran ? this.completions.watch(c.event) : undefined));
    } else {
      const enqueued = this.dmaChain.then(() => this.enqueue(c));
      this.dmaChain = enqueued.catch(() => {});
      const arrived = enqueued.then((ran) => (ran ? this.completions.watch(c.event) : undefined));
      landed = arrived.then(() => (deps.length ? Promise.all(deps) : undefined)).then(() => drainChunk(this.host, c));
      landed.then(hostDone, hostDone);
    }
    landed.then(
      () => this.settle(c, undefined),
      (e: unknown) => this.settle(c, e),
    );
    void hostWork.then(() => this.hazards.unregister(op));
  }

  /**
   * Enqueues the chunk's device copy on its stream, after the chunks before it (the caller chains it): one copy,
   * or one batched copy of its pieces. Answers false when every transfer it carries has failed or was aborted (the
   * copy is left out: nothing more lands for them).
   */
  private async enqueue(c: Chunk): Promise<boolean> {
    if (this.beforeDeviceCopy) await this.beforeDeviceCopy({ bytes: chunkBytesOf(c.segs), direction: c.direction });
    for (const s of c.segs) if (s.job.failed === undefined && s.job.signal?.aborted) this.fail(s.job, aborted());
    if (c.segs.every((s) => s.job.failed !== undefined)) return false;
    const rt = this.host.rt;
    const b = rt.backend;
    const s = c.stream;
    s.assertLive('transfer');
    if (this.lastStream && this.lastStream !== s && !this.lastStream.disposed) {
      // Copies through one stager land in the order asked, whichever streams they go on.
      const h = this.host.handoffEvent();
      h.record(this.lastStream);
      s.waitEvent(h);
    }
    this.lastStream = s;
    const base = c.slot ? c.slot.memory.address : 0;
    const up = c.direction === 'upload';
    const addr = (g: Segment): [number, number] => {
      const host = c.mode === 'direct' ? g.host : base + g.at;
      return up ? [g.dev, host] : [host, g.dev];
    };
    const kind = (g: Segment): CopyKind => (g.managed ? CopyKind.Default : up ? CopyKind.HostToDevice : CopyKind.DeviceToHost);
    if (c.segs.length > 1 && b.capabilities.batchCopies && c.segs.every((g) => !g.managed && g.pinned)) {
      b.memcpyBatchAsync(packBatch(c.segs.map(addr), c.segs, up, this.host.device), s.handle);
    } else {
      for (const g of c.segs) {
        const [d, src] = addr(g);
        b.memcpyAsync(d, src, g.bytes, kind(g), s.handle);
      }
    }
    c.event.record(s);
    return true;
  }

  /** A chunk settled: its slot goes back, its bytes count as landed, and transfers that are done finish. */
  private settle(c: Chunk, error: unknown): void {
    c.release();
    this.live--;
    this.flightBytes -= chunkBytesOf(c.segs);
    const jobs = new Set<Job>();
    for (const s of c.segs) {
      if (error === undefined && s.job.failed === undefined) s.job.left -= s.bytes;
      jobs.add(s.job);
    }
    for (const j of jobs) {
      j.inFlight--;
      if (error !== undefined) this.fail(j, error);
      this.maybeFinish(j);
    }
    this.checkIdle();
  }

  /** Marks a transfer failed (its first failure is kept); its queued pieces are dropped when the engine reaches them. */
  fail(j: Job, e: unknown): void {
    if (j.failed === undefined) j.failed = e;
  }

  private maybeFinish(j: Job): void {
    if (j.settled || j.inFlight > 0) return;
    if (j.failed === undefined && j.left > 0) return;
    if (j.failed !== undefined && this.hasQueued(j)) return;
    j.settled = true;
    j.finish(j.failed);
  }

  private hasQueued(j: Job): boolean {
    for (let i = this.head; i < this.queue.length; i++) if (this.queue[i]!.job === j) return true;
    return false;
  }

  private checkIdle(): void {
    if (!this.idle) return;
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const r of w) r();
  }

  /** Fails everything still queued (the stager is going away); chunks in flight settle on their own. */
  abandon(e: unknown): void {
    for (let i = this.head; i < this.queue.length; i++) this.fail(this.queue[i]!.job, e);
    for (let p = this.peek(); p; p = this.peek()) this.drop();
    this.compact();
    this.checkIdle();
  }
}

/**
 * Waits for chunks' device copies in the order they were enqueued, one waiting thread at a time: the oldest is waited
 * for (off the event loop), then every later one whose event has already completed lands at once, without a wait of
 * its own (a query). A lone transfer cut into a few chunks pays one wait, not one per chunk.
 */
class Completions {
  private q: Array<{ event: GpuEvent; resolve: () => void; reject: (e: unknown) => void }> = [];
  private head = 0;
  private running = false;

  watch(event: GpuEvent): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.q.push({ event, resolve, reject });
      void this.run();
    });
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.head < this.q.length) {
        const w = this.q[this.head]!;
        try {
          await w.event.synchronize();
          this.head++;
          w.resolve();
        } catch (e) {
          this.head++;
          w.reject(e);
          continue;
        }
        while (this.head < this.q.length) {
          const n = this.q[this.head]!;
          let done: boolean;
          try {
            done = n.event.query();
          } catch (e) {
            this.head++;
            n.reject(e);
            continue;
          }
          if (!done) break;
          this.head++;
          n.resolve();
        }
        if (this.head === this.q.length) {
          this.q = [];
          this.head = 0;
        }
      }
    } finally {
      this.running = false;
    }
  }
}

/** The error of an aborted transfer. */
export function aborted(): GpuError {
  return new GpuError(ErrorCode.ABORTED, 'the transfer was aborted: the chunks in flight finished, nothing more was copied');
}
