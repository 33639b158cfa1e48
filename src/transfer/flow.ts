/**
 * The engine of a stager: every transfer queued on it is cut into pieces that flow through the pinned ring in the
 * order they were asked for, without the ring draining between transfers. Pieces are packed into chunks: one slot of
 * the ring, filled by the host threads (a gather of many small sources, or a file read) and landed with one device
 * copy, a batched copy when the chunk holds several pieces that do not continue each other (laid out in the slot in
 * device order first, so that a list landing in reverse order continues there too); downloads the other way round.
 * Chunks go to the device in order (a later transfer to the same memory lands after an earlier one) and their
 * completions are waited for in order, one waiting thread at a time.
 *
 *   upload chunk:   [hazards] -> fill slot (threads) -> device copy (in chunk order) -> event -> slot free
 *   download chunk: device copy (in chunk order) -> event -> [hazards] -> drain slot (threads) -> slot free
 *
 * Host ranges are tracked per chunk while chunks use them, so that a download into a buffer waits for an earlier
 * upload still reading it (and the reverse; the items of one list keep no order among themselves, hazards.ts);
 * device ranges are ordered by the stream. A failing chunk fails the
 * transfers it carries; the others go on, and the ring is whole again once the chunks in flight have settled.
 *
 * Everything here runs on the JS thread. The copier's threads only see the lists of copies a chunk hands them
 * (copier.copyMany) and answer through the copier; the ring's slots and this queue are the JS thread's alone.
 */
import type { Backend } from '../backend/backend.js';
import { ErrorCode, GpuError } from '../errors.js';
import type { Stream } from '../stream/stream.js';
import type { GpuEvent } from '../stream/event.js';
import type { Slot } from './ring.js';
import type { Chunk, FlowHost, Transfer } from './flow-types.js';

export type { Chunk, FlowHost, Transfer, TransferMode, TransferOwner } from './flow-types.js';
import { copyChunk, drainChunk, fillChunk, spansOf } from './chunk-io.js';
import { HostHazards } from './hazards.js';
import { PIECE, PieceQueue } from './piece-queue.js';
import { MAX_SEGMENTS, SegmentList } from './segment-list.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Smallest chunk the engine cuts when little is queued (smaller chunks overlap the fill with the copy sooner). */
const MIN_CHUNK = MiB;
/** A direct chunk ends once it carries this much (its pieces are copied from where they are, whole). */
const DIRECT_CHUNK = 256 * MiB;
/** File chunks start at file offsets aligned to this (O_DIRECT needs it; buffered reads do not mind). */
export const FILE_ALIGN = 4096;

export class Flow {
  private readonly queue = new PieceQueue();
  private queuedBytes = 0;
  /** A drive runs (it may be waiting for a slot). */
  private pumping = false;
  /** A drive is due at the end of this turn. */
  private scheduled = false;
  private dmaChain: Promise<unknown> = Promise.resolve();
  private readonly completions = new Completions();
  private lastStream: Stream | undefined;
  private readonly hazards = new HostHazards();
  /** Transfers that lost a piece while a chunk was packed: they may finish once the chunk is counted in flight. */
  private readonly unsent: Transfer[] = [];
  /** Segment lists of settled chunks, reused by the next ones. */
  private readonly spareSegments: SegmentList[] = [];
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
  get queued(): number {
    return this.queuedBytes;
  }

  /** True while nothing is queued or in flight. */
  get idle(): boolean {
    return this.queue.empty && this.live === 0;
  }

  /** Resolves when nothing is queued or in flight. */
  drained(): Promise<void> {
    return this.idle ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }

  /**
   * Queues a piece of `t`: `bytes` between host memory at `host` (a file offset for a file transfer) and device
   * memory at `dev`; `flags` from PIECE; `key` names the host buffer (or file) and `keyBase` is its first byte's
   * address. Nothing starts before {@link submitted}; {@link takeBack} drops what a refused list pushed.
   */
  push(t: Transfer, host: number, dev: number, bytes: number, flags: number, key: object | string, keyBase: number): void {
    this.queue.push(t, host, dev, bytes, flags, key, keyBase);
    this.queuedBytes += bytes;
  }

  /**
   * The queue with room for `rows` more pieces, for a caller that writes them itself (CallItems.addList: a row per
   * item, column by column, the queue's `tail` moved past each); it tells their bytes with {@link pushed}. Rows
   * pushed meanwhile (push) take the same room.
   */
  reserve(rows: number): PieceQueue {
    this.queue.reserve(rows);
    return this.queue;
  }

  /** Counts the bytes of rows a caller wrote into the room {@link reserve} made. */
  pushed(bytes: number): void {
    this.queuedBytes += bytes;
  }

  /** Drops the last `count` pieces pushed (a list refused after some of its items were queued). */
  takeBack(count: number): void {
    this.queuedBytes -= this.queue.dropLast(count);
  }

  /**
   * Starts what was pushed. Whole chunks' worth of staged pieces start at once while a slot is free (at most
   * `startNow`), so that the threads copy while a program is still making its calls (4096 calls of rt.upload in a
   * row); what is left waits for the end of the current turn, to be packed with what comes next. A list, whose call
   * returns once it has been queued, starts two: packing more before it returns would only hold back the device
   * copies of the chunks already filled (they are enqueued once the JS thread is free).
   */
  submitted(startNow = Number.POSITIVE_INFINITY): void {
    if (!this.pumping) {
      const ring = this.host.ring;
      let started = 0;
      for (let t = this.peek(); t && t.mode === 'staged' && this.queuedBytes >= ring.chunkBytes && started < startNow; t = this.peek()) {
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
        started++;
      }
    }
    this.pump();
  }

  private pump(): void {
    if (this.scheduled || this.queue.empty) return;
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
        const t = this.peek();
        if (!t) break;
        let slot: Slot | undefined;
        if (t.mode !== 'direct') {
          const s = this.host.ring.acquire();
          slot = s instanceof Promise ? await s : s;
        }
        const chunk = this.assemble(slot);
        if (!chunk) {
          if (slot) this.host.ring.release(slot);
          continue;
        }
        this.start(chunk);
        // Between chunks, the fills the threads have finished go on to their device copies (within this turn:
        // the copier's answers are taken now, their continuations run at this await), instead of all waiting for
        // the JS thread to pack every chunk a free slot allows.
        if (slot) this.host.copier().poll?.();
        await undefined;
      }
    } catch (e) {
      // No slot could be pinned (or an event made): every transfer still queued fails with it.
      for (let t = this.peek(); t; t = this.peek()) {
        this.fail(t, e);
        this.drop();
      }
    } finally {
      this.pumping = false;
      if (!this.queue.empty) this.pump();
      else this.checkIdle();
    }
  }

  /** The transfer of the first queued piece still live (pieces of failed or aborted transfers are dropped on the way). */
  private peek(): Transfer | undefined {
    const q = this.queue;
    while (!q.empty) {
      const t = q.transfer[q.head]!;
      if (t.failed === undefined && t.signal?.aborted) this.fail(t, aborted());
      if (t.failed === undefined) return t;
      this.drop();
    }
    return undefined;
  }

  /** The head piece leaves the queue unsent; its transfer finishes if nothing of it is left (unless `later`). */
  private drop(later = false): void {
    const q = this.queue;
    const t = q.transfer[q.head]!;
    this.queuedBytes -= q.bytes[q.head]!;
    q.leave();
    if (later) this.unsent.push(t);
    else this.maybeFinish(t);
  }

  /**
   * The next chunk from the queue's head. Little queued or in flight (a lone transfer of a few MiB): chunks are cut
   * smaller, down to 1 MiB, so that the copy of the first starts while the threads fill the next; a large transfer
   * keeps full chunks to its end (what is in flight counts).
   */
  private assemble(slot: Slot | undefined): Chunk | undefined {
    const first = this.peek();
    if (!first) return undefined;
    if ((first.mode === 'direct') !== (slot === undefined)) return undefined;
    const ring = this.host.ring;
    const work = this.queuedBytes + this.flightBytes;
    const limit = Math.min(ring.chunkBytes, Math.max(MIN_CHUNK, Math.ceil(work / ring.depth / (64 * KiB)) * 64 * KiB));
    const segs = this.spareSegments.pop() ?? new SegmentList();
    const q = this.queue;
    let fileStart = 0;
    let fileBytes = 0;
    if (first.mode === 'file') {
      // One piece per chunk, its slot read from an aligned file offset so that the next chunk starts aligned too.
      const h = q.head;
      const lead = q.host[h]! % FILE_ALIGN;
      const take = Math.min(q.bytes[h]!, Math.max(FILE_ALIGN, Math.floor(limit / FILE_ALIGN) * FILE_ALIGN) - lead);
      fileStart = q.host[h]! - lead;
      fileBytes = Math.ceil((lead + take) / FILE_ALIGN) * FILE_ALIGN;
      segs.add(first, q.host[h]!, q.dev[h]!, take, q.flags[h]!, q.key[h]!, 0, lead);
      this.take(take);
    } else {
      this.pack(first, segs, limit);
      if (first.mode === 'staged') segs.placeByDevice();
    }
    if (segs.count === 0) {
      // Every piece it reached belonged to a transfer that failed on the way (a detached buffer).
      segs.clear(this.host.rt.backend);
      this.spareSegments.push(segs);
      this.finishUnsent();
      return undefined;
    }
    const event = slot ? slot.event : this.host.takeEvent();
    const chunk: Chunk = {
      direction: first.direction,
      mode: first.mode,
      stream: first.stream,
      slot,
      event,
      segs,
      fileStart,
      fileBytes,
      deps: [],
      release: () => {
        if (slot) this.host.ring.release(slot);
        else this.host.giveEvent(event);
        segs.clear(this.host.rt.backend);
        this.spareSegments.push(segs);
      },
    };
    for (const t of segs.transfers) {
      t.chunks++;
      t.inFlight++;
    }
    this.live++;
    this.flightBytes += segs.total;
    this.chunksStarted++;
    this.finishUnsent();
    return chunk;
  }

  /**
   * Packs queued pieces of the same mode, direction and stream as `first` back to back into `segs`: a staged chunk
   * up to the slot's `limit` (the last piece cut where the chunk ends), a direct one whole pieces until it carries
   * 256 MiB; at most the segments a chunk holds.
   */
  private pack(first: Transfer, segs: SegmentList, limit: number): void {
    const q = this.queue;
    const staged = first.mode === 'staged';
    const cap = staged ? limit : Number.POSITIVE_INFINITY;
    const backend = this.host.rt.backend;
    let used = 0;
    // One run of a transfer's pieces at a time: the transfer is checked (failed, aborted, the chunk's mode, direction
    // and stream) once per run, and its whole pieces go into the chunk's columns in one loop, the queue's head and
    // byte counts moved once (nothing in that loop runs code that could abort or fail it, but a detached buffer,
    // which fails it here and sends the loop back through peek).
    for (let t: Transfer | undefined = first; t && !segs.full; t = this.peek()) {
      if (t.mode !== first.mode || t.direction !== first.direction || t.stream !== first.stream) break;
      used += this.packRun(t, segs, cap, staged, backend);
      const h = q.head;
      if (q.head < q.tail && q.transfer[h] === t && t.failed === undefined && !segs.full) {
        // The run stopped at a piece of its own transfer: one that is cut where the chunk ends, one whose buffer was
        // detached, or (direct) the chunk's bytes reached.
        const bytes = q.bytes[h]!;
        const take = Math.min(bytes, cap - used);
        if (take <= 0 || (!staged && used >= DIRECT_CHUNK)) break;
        const flags = q.flags[h]!;
        let host = q.host[h]!;
        let keyBase = q.keyBase[h]!;
        if ((flags & PIECE.BUFFER) !== 0) {
          // A JS buffer is placed now; one detached (or shrunk) since its call fails its transfer, nothing is read.
          const ab = q.key[h] as ArrayBuffer;
          if (ab.byteLength < host + bytes) {
            this.fail(t, detached());
            this.drop(true);
            continue;
          }
          keyBase = segs.adopt(backend, ab);
          host += keyBase;
        }
        segs.add(t, host, q.dev[h]!, take, flags, q.key[h]!, keyBase, used);
        used += take;
        this.take(take);
        break; // the chunk is full (its last piece cut), or a direct chunk carries enough
      }
      if (!staged && used >= DIRECT_CHUNK) break;
      if (used >= cap) break;
    }
  }

  /**
   * Moves the whole pieces of `t` at the queue's head into `segs` while the chunk holds them within `cap` bytes (a
   * direct chunk: until it carries 256 MiB), placing their JS buffers; stops before a piece that does not fit whole,
   * before one whose buffer was detached or shrunk, and at another transfer's piece. Answers the bytes moved.
   */
  private packRun(t: Transfer, segs: SegmentList, cap: number, staged: boolean, backend: Backend): number {
    const q = this.queue;
    const end = q.tail;
    const qHost = q.host;
    const qDev = q.dev;
    const qBytes = q.bytes;
    const qKeyBase = q.keyBase;
    const qFlags = q.flags;
    const qKey = q.key;
    const qTransfer = q.transfer;
    const first = segs.count;
    const base = segs.total;
    let h = q.head;
    let i = first;
    let at = base;
    while (h < end && i < MAX_SEGMENTS && qTransfer[h] === t) {
      const bytes = qBytes[h]!;
      if (staged && at + bytes > cap) break;
      const flags = qFlags[h]!;
      const key = qKey[h]!;
      let host = qHost[h]!;
      let keyBase = qKeyBase[h]!;
      if ((flags & PIECE.BUFFER) !== 0) {
        if ((key as ArrayBuffer).byteLength < host + bytes) break;
        keyBase = segs.adopt(backend, key as ArrayBuffer);
        host += keyBase;
      }
      segs.put(i, t, host, qDev[h]!, bytes, flags, key, keyBase, at);
      // The references go at once: a landed list's buffers are not kept alive by the queue.
      qKey[h] = '';
      qTransfer[h] = undefined as unknown as Transfer;
      at += bytes;
      h++;
      i++;
      if (!staged && at >= DIRECT_CHUNK) break;
    }
    if (i === first) return 0;
    const moved = at - base;
    segs.appended(t, i - first, moved);
    q.head = h;
    if (h === q.tail) q.head = q.tail = 0;
    this.queuedBytes -= moved;
    return moved;
  }

  /** Takes `take` bytes off the front of the head piece (the whole piece leaves the queue). */
  private take(take: number): void {
    this.queuedBytes -= take;
    this.queue.consume(take);
  }

  /** Runs a chunk's life: registers its host ranges now (in order), then fills, copies, waits and drains. */
  private start(c: Chunk): void {
    const reads = c.direction === 'upload';
    // Chunks of one transfer alone (a list's) are not ordered against each other: see hazards.ts.
    const owner = c.segs.transfers.length === 1 ? c.segs.transfers[0] : undefined;
    const op = this.hazards.register(() => spansOf(c), !reads, owner, c.deps);
    let hostDone: () => void = () => {};
    op.done = new Promise<void>((r) => {
      // Forgotten at once (before the chunk settles and its segments are reused), then the chunks waiting on it go on.
      hostDone = () => {
        this.hazards.unregister(op);
        r();
      };
    });
    const deps = c.deps;
    let landed: Promise<void>;
    if (reads) {
      const filled = (deps.length ? Promise.all(deps) : Promise.resolve()).then(() => fillChunk(this.host, c));
      filled.then(hostDone, hostDone);
      const enqueued = this.dmaChain.then(() => filled).then(() => this.enqueueCopy(c));
      this.dmaChain = enqueued.catch(() => {});
      landed = enqueued.then((ran) => (ran ? this.completions.watch(c.event) : undefined));
    } else {
      const enqueued = this.dmaChain.then(() => this.enqueueCopy(c));
      this.dmaChain = enqueued.catch(() => {});
      const arrived = enqueued.then((ran) => (ran ? this.completions.watch(c.event) : undefined));
      landed = arrived.then(() => (deps.length ? Promise.all(deps) : undefined)).then(() => drainChunk(this.host, c));
      landed.then(hostDone, hostDone);
    }
    landed.then(
      () => this.settle(c, undefined),
      (e: unknown) => this.settle(c, e),
    );
  }

  /**
   * Enqueues the chunk's device copy on its stream, after the chunks before it (the caller chains it). Answers false
   * when every transfer it carries has failed or was aborted (the copy is left out: nothing more lands for them).
   */
  private async enqueueCopy(c: Chunk): Promise<boolean> {
    if (this.beforeDeviceCopy) await this.beforeDeviceCopy({ bytes: c.segs.total, direction: c.direction });
    let live = false;
    for (const t of c.segs.transfers) {
      if (t.failed === undefined && t.signal?.aborted) this.fail(t, aborted());
      if (t.failed === undefined) live = true;
    }
    if (!live) return false;
    const s = c.stream;
    s.assertLive('transfer');
    if (this.lastStream && this.lastStream !== s && !this.lastStream.disposed) {
      // Copies through one stager land in the order asked, whichever streams they go on.
      const h = this.host.handoffEvent();
      h.record(this.lastStream);
      s.waitEvent(h);
    }
    this.lastStream = s;
    copyChunk(this.host.rt.backend, c, this.host.device, s.handle);
    c.event.record(s);
    return true;
  }

  /** A chunk settled: its bytes count as landed, transfers that are done finish, and its slot goes back. */
  private settle(c: Chunk, error: unknown): void {
    const segs = c.segs;
    this.live--;
    this.flightBytes -= segs.total;
    if (error === undefined) {
      for (let i = 0; i < segs.transfers.length; i++) {
        const t = segs.transfers[i]!;
        if (t.failed === undefined) t.left -= segs.transferBytes[i]!;
      }
    }
    // The transfers are read before the release empties the list for the next chunk.
    const several = segs.transfers.length > 1 ? segs.transfers.slice() : undefined;
    const one = segs.transfers[0]!;
    c.release();
    if (several) for (const t of several) this.closeOut(t, error);
    else this.closeOut(one, error);
    this.checkIdle();
  }

  private closeOut(t: Transfer, error: unknown): void {
    t.inFlight--;
    if (error !== undefined) this.fail(t, error);
    this.maybeFinish(t);
  }

  /** Marks a transfer failed (its first failure is kept); its queued pieces are dropped when the engine reaches them. */
  fail(t: Transfer, e: unknown): void {
    if (t.failed === undefined) t.failed = e;
  }

  private maybeFinish(t: Transfer): void {
    if (t.settled || t.inFlight > 0) return;
    if (t.failed === undefined && t.left > 0) return;
    if (t.failed !== undefined && this.queue.holds(t)) return;
    t.settled = true;
    t.owner.transferFinished(t, t.failed);
  }

  private finishUnsent(): void {
    while (this.unsent.length > 0) this.maybeFinish(this.unsent.pop()!);
  }

  private checkIdle(): void {
    if (!this.idle) return;
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const r of w) r();
  }

  /** Fails everything still queued (the stager is going away); chunks in flight settle on their own. */
  abandon(e: unknown): void {
    const q = this.queue;
    for (let i = q.head; i < q.tail; i++) this.fail(q.transfer[i]!, e);
    for (let t = this.peek(); t; t = this.peek()) this.drop();
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

/** The error of a transfer whose JS buffer was detached (or shrunk) before the engine reached it. */
function detached(): GpuError {
  return new GpuError(
    ErrorCode.INVALID_STATE,
    'a host buffer of the transfer was detached or shrunk before its bytes were copied (keep buffers as they are until the transfer settles)',
  );
}
