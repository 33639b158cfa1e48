/**
 * Host-side copies and file reads on parallel threads: the chunk work of a staged transfer (pageable memory into
 * pinned chunks and back, many small buffers gathered into one chunk or scattered out of it, a file read into a chunk
 * or written from one). A pool of worker threads, each calling libc (memcpy, pread, pwrite) through koffi, is fed
 * through mailboxes in shared memory (Atomics); a copy is a list of entries cut into at most one job per thread.
 *
 * Why not koffi's asynchronous calls: they run on libuv's thread pool, 4 threads unless UV_THREADPOOL_SIZE was set
 * before its first use, shared with the file system, zlib, DNS and gpumem's own stream waits (each holds a thread
 * while it waits); and each call allocates its work item. A dedicated pool sized for the machine copies in
 * parallel whatever else the process does, and posting a job costs a few stores and one notify.
 *
 * The threads start in the background when the copier is made (a Node.js worker takes tens of milliseconds to boot):
 * `ready` resolves once every thread is up. Work posted before then waits in the mailboxes of the threads still
 * booting; `idleThreads()` lets a caller do small work itself meanwhile.
 */
import { fstatSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { constants } from 'node:os';
import { DisposedError, ErrorCode, GpuError } from '../../errors.js';
import type { Address, HostCopier } from '../backend.js';
import { FADV, libcIo } from './host-io/ffi.js';
import { CTL, END_OF_FILE, ENTRY_FIELDS, JOB_FIELDS, LIST_CAP, MAX_GROUPS, OP, PIN_CONFIG_BYTES, RING, SLEEP } from './host-copier-layout.js';

/** Parts are cut at this granularity so that two threads never write the same page (and O_DIRECT stays aligned). */
const PART_ALIGN = 4096;
/** A part below this is not worth a thread of its own. */
const MIN_PART = 64 * 1024;
/** Microseconds a thread spins on its empty mailbox before sleeping (GPUMEM_COPIER_SPIN_US overrides). */
const SPIN_MICROS = 50;

/**
 * Entries as the shared list holds them, back to back: ENTRY_FIELDS numbers each (operation, a, b, bytes, file
 * offset, bytes needed). A gather of 512 copies is one array, written into the shared list with one call.
 */
type Entries = Float64Array;
const F = ENTRY_FIELDS;
const EMPTY: Entries = new Float64Array(0);

/** A request to the threads (a copy, a gather, a file read or write, a pin), pending from its call until it settles. */
interface PendingRequest {
  entries: Entries;
  what: string;
  resolve: () => void;
  reject: (e: unknown) => void;
  /** A pin: resolved with the group's result word. */
  resolveWith?: (address: number) => void;
}

const errnoNames = new Map<number, string>(Object.entries(constants.errno).map(([k, v]) => [v, k]));

export class ThreadedHostCopier implements HostCopier {
  readonly threads: number;
  /** Resolves when every thread has started (work posted earlier is done as they come up). */
  readonly ready: Promise<void>;
  private readonly ctl: Int32Array;
  private readonly params: Float64Array;
  private readonly groups: Int32Array;
  private readonly lists: Float64Array;
  private readonly status: Int32Array;
  private readonly where: BigInt64Array;
  private readonly pinConfig: Uint8Array;
  private pinning = false;
  private readonly workers: Worker[] = [];
  /** Threads past loading their modules (koffi's native part among them). */
  private readonly loaded = new Set<Worker>();
  private readonly freeGroups: number[] = [];
  private readonly inFlight = new Map<number, PendingRequest>();
  private readonly queued: PendingRequest[] = [];
  private started = 0;
  private next = 0;
  private pumping = false;
  private disposed = false;
  private failure: Error | undefined;

  constructor(threads: number) {
    this.threads = threads;
    this.ctl = new Int32Array(new SharedArrayBuffer(4 * CTL.length(threads)));
    this.params = new Float64Array(new SharedArrayBuffer(8 * threads * RING * JOB_FIELDS));
    this.groups = new Int32Array(new SharedArrayBuffer(4 * MAX_GROUPS));
    this.lists = new Float64Array(new SharedArrayBuffer(8 * MAX_GROUPS * LIST_CAP * ENTRY_FIELDS));
    this.status = new Int32Array(new SharedArrayBuffer(4 * MAX_GROUPS));
    this.where = new BigInt64Array(new SharedArrayBuffer(8 * MAX_GROUPS));
    this.pinConfig = new Uint8Array(new SharedArrayBuffer(PIN_CONFIG_BYTES));
    for (let g = MAX_GROUPS - 1; g >= 0; g--) this.freeGroups.push(g);
    const spin = Number(process.env.GPUMEM_COPIER_SPIN_US ?? SPIN_MICROS);
    const url = new URL('./host-copier-worker.js', import.meta.url);
    const up: Array<Promise<void>> = [];
    for (let i = 0; i < threads; i++) {
      const w = new Worker(url, {
        workerData: {
          ctl: this.ctl.buffer,
          params: this.params.buffer,
          groups: this.groups.buffer,
          lists: this.lists.buffer,
          status: this.status.buffer,
          where: this.where.buffer,
          pin: this.pinConfig.buffer,
          index: i,
          spinMicros: Number.isFinite(spin) && spin >= 0 ? spin : SPIN_MICROS,
          threads,
        },
      });
      w.unref();
      w.once('message', () => {
        // the thread's modules are loaded (its first message): from now on terminate() is safe
        this.loaded.add(w);
        if (this.disposed) void w.terminate();
      });
      up.push(
        new Promise<void>((resolve) => {
          w.once('online', () => {
            this.started++;
            resolve();
          });
          w.once('error', () => resolve());
        }),
      );
      w.on('error', (e) => {
        this.failure = new GpuError(ErrorCode.WORKER_FAILED, `a host copier thread failed: ${e.message}`, { cause: e });
        this.fail(this.failure);
      });
      this.workers.push(w);
    }
    this.ready = Promise.all(up).then(() => {});
  }

  /** Threads that have started. */
  get online(): number {
    return this.started;
  }

  copy(dst: Address, src: Address, bytes: number): Promise<void> {
    return this.submit(Float64Array.of(OP.COPY, dst, src, bytes, 0, bytes), 'copy');
  }

  copyMany(dsts: ArrayLike<Address>, srcs: ArrayLike<Address>, sizes: ArrayLike<number>): Promise<void> {
    let n = 0;
    let total = 0;
    let largest = 0;
    for (let i = 0; i < sizes.length; i++) {
      const bytes = sizes[i]!;
      if (bytes > 0) {
        n++;
        total += bytes;
        if (bytes > largest) largest = bytes;
      }
    }
    // A gather of small copies (none to be cut, a group free, nothing queued before it) is written straight into its
    // group's list in shared memory: no array of entries per request.
    if (
      n > 0 &&
      n <= LIST_CAP &&
      largest <= partBytes(total, this.threads) &&
      this.freeGroups.length > 0 &&
      this.queued.length === 0 &&
      !this.disposed &&
      !this.failure
    ) {
      const g = this.freeGroups.pop()!;
      const list = this.lists;
      for (let i = 0, at = g * LIST_CAP * F; i < sizes.length; i++) {
        const bytes = sizes[i]!;
        if (bytes <= 0) continue;
        list[at] = OP.COPY;
        list[at + 1] = dsts[i]!;
        list[at + 2] = srcs[i]!;
        list[at + 3] = bytes;
        list[at + 4] = 0;
        list[at + 5] = bytes;
        at += F;
      }
      return new Promise<void>((resolve, reject) => {
        this.start(g, n, total, { entries: EMPTY, what: 'copy', resolve, reject });
        this.pump();
      });
    }
    const entries = new Float64Array(n * F);
    for (let i = 0, at = 0; i < sizes.length; i++) {
      const bytes = sizes[i]!;
      if (bytes <= 0) continue;
      entries[at] = OP.COPY;
      entries[at + 1] = dsts[i]!;
      entries[at + 2] = srcs[i]!;
      entries[at + 3] = bytes;
      entries[at + 5] = bytes;
      at += F;
    }
    return this.submit(entries, 'copy');
  }

  readFile(fd: number, dst: Address, bytes: number, offset: number, need = bytes): Promise<void> {
    return this.submit(Float64Array.of(OP.READ, fd, dst, bytes, offset, need), 'pread');
  }

  writeFile(fd: number, src: Address, bytes: number, offset: number): Promise<void> {
    return this.submit(Float64Array.of(OP.WRITE, fd, src, bytes, offset, bytes), 'pwrite');
  }

  /**
   * Lets the threads pin memory with the runtime's own allocator (`symbol` of the library at `library`, as the
   * backend loaded it): pinning costs about as much per byte as the copy itself, and done on a thread it overlaps
   * what the JS thread does.
   */
  configurePinning(library: string, symbol: 'cudaHostAlloc' | 'hipHostMalloc'): void {
    const text = new TextEncoder().encode(`${library}\0${symbol}\0`);
    if (text.length > PIN_CONFIG_BYTES) return;
    this.pinConfig.set(text);
    this.pinning = true;
  }

  /** Whether {@link pinHost} can be used (configurePinning was called). */
  get canPin(): boolean {
    return this.pinning;
  }

  /**
   * Pinned host memory of `bytes` (portable), allocated on one of the threads. Free it with the backend's hostFree.
   * @throws GpuError NATIVE (rejects) with the runtime's status; UNSUPPORTED before configurePinning.
   */
  pinHost(bytes: number, landed?: (address: Address) => void): Promise<Address> {
    if (!this.pinning) return Promise.reject(new GpuError(ErrorCode.UNSUPPORTED, 'the host copier was not told how to pin memory'));
    return new Promise<Address>((resolve, reject) => {
      const p: PendingRequest = { entries: Float64Array.of(OP.PIN, 1 /* portable */, 0, bytes, 0, 0), what: 'pin', resolve: () => {}, reject };
      p.resolveWith = (address) => {
        landed?.(address);
        resolve(address);
      };
      if (this.disposed) return reject(new DisposedError('the host copier was disposed'));
      if (this.freeGroups.length > 0) this.post(p);
      else this.queued.push(p);
      this.pump();
    });
  }

  cachedShare(fd: number, offset: number, bytes: number): number | undefined {
    try {
      const r = libcIo().residentPages(fd, offset, bytes);
      return r && r.pages > 0 ? r.resident / r.pages : undefined;
    } catch {
      return undefined;
    }
  }

  dropCache(fd: number, offset: number, bytes: number): boolean {
    try {
      return libcIo().fadvise(fd, offset, bytes, FADV.DONTNEED) === 0;
    } catch {
      return false;
    }
  }

  /**
   * Settles what the threads have finished, now: a pin's `landed` runs before this returns. The copier's own wait
   * sees the same answers a turn of the event loop later (after a long synchronous stretch of the program, the
   * first transfer would otherwise start only then).
   */
  poll(): void {
    if (!this.disposed && !this.failure && this.inFlight.size > 0) this.settle();
  }

  private submit(entries: Entries, what: string): Promise<void> {
    if (this.disposed) return Promise.reject(new DisposedError('the host copier was disposed'));
    if (this.failure) return Promise.reject(this.failure);
    const parts = split(entries, this.threads);
    if (parts.length === 0) return Promise.resolve();
    if (parts.length > LIST_CAP * F) {
      const pieces: Array<Promise<void>> = [];
      for (let i = 0; i < parts.length; i += LIST_CAP * F) pieces.push(this.postOrQueue(parts.subarray(i, i + LIST_CAP * F), what));
      return Promise.all(pieces).then(() => {});
    }
    return this.postOrQueue(parts, what);
  }

  /** One group of at most LIST_CAP entries, posted now or queued until a group is free. */
  private postOrQueue(parts: Entries, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const p: PendingRequest = { entries: parts, what, resolve, reject };
      if (this.freeGroups.length > 0) this.post(p);
      else this.queued.push(p);
      this.pump();
    });
  }

  /** Writes a group's entries and posts them (see {@link start}). */
  private post(p: PendingRequest): void {
    const g = this.freeGroups.pop()!;
    const e = p.entries;
    this.lists.set(e, g * LIST_CAP * F);
    const n = e.length / F;
    let total = 0;
    for (let i = 0; i < n; i++) total += e[i * F + 3]!;
    this.start(g, n, total, p);
  }

  /**
   * Posts group `g`'s `n` entries (already in its list) as at most one run of consecutive entries per thread,
   * balanced by bytes, and no more runs than the bytes are worth (a run of at least 64 KiB: a gather of 512 small
   * copies goes to one or two threads, not to every one). Of the threads it posts to, it wakes at most one that
   * sleeps: a thread woken from its sleep wakes others that sleep with work posted (host-copier-worker.ts), so the
   * JS thread makes one wake-up call per request, not one per thread.
   */
  private start(g: number, n: number, total: number, p: PendingRequest): void {
    const list = this.lists;
    const first0 = g * LIST_CAP * F;
    const jobs = Math.max(1, Math.min(this.threads, n, Math.floor(total / MIN_PART)));
    const target = total / jobs;
    Atomics.store(this.status, g, 0);
    Atomics.store(this.where, g, 2n ** 63n - 1n);
    // The job count first: the threads count the group down from it.
    let runs = 0;
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += list[first0 + i * F + 3]!;
      if (i === n - 1 || (runs < jobs - 1 && acc >= target * (runs + 1))) runs++;
    }
    Atomics.store(this.groups, g, runs);
    this.inFlight.set(g, p);
    let sleeper = -1;
    let first = 0;
    let posted = 0;
    acc = 0;
    for (let i = 0; i < n; i++) {
      acc += list[first0 + i * F + 3]!;
      if (!(i === n - 1 || (posted < jobs - 1 && acc >= target * (posted + 1)))) continue;
      const w = this.next;
      this.next = (this.next + 1) % this.threads;
      const count = Atomics.load(this.ctl, CTL.mailbox(w));
      const at = (w * RING + (count & (RING - 1))) * JOB_FIELDS;
      this.params[at] = g;
      this.params[at + 1] = first;
      this.params[at + 2] = i + 1 - first;
      Atomics.store(this.ctl, CTL.mailbox(w), (count + 1) | 0);
      first = i + 1;
      posted++;
      // A thread still spinning (or busy) sees the counter itself: only a sleeping one needs waking (layout.ts).
      if (sleeper < 0 && Atomics.load(this.ctl, CTL.mailbox(w) + 2) === SLEEP.ASLEEP) sleeper = w;
    }
    // One wake-up: the thread claims the others (the claim is the compare-exchange, so each is woken once).
    if (sleeper >= 0 && Atomics.compareExchange(this.ctl, CTL.mailbox(sleeper) + 2, SLEEP.ASLEEP, SLEEP.WAKING) === SLEEP.ASLEEP) {
      Atomics.notify(this.ctl, CTL.mailbox(sleeper), 1);
    }
  }

  /** Settles finished copies as the threads report them, and posts queued ones; runs while any is in flight. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    void (async () => {
      try {
        while (this.inFlight.size > 0 && !this.failure) {
          const seen = Atomics.load(this.ctl, CTL.GROUP_DONE);
          this.settle();
          if (this.inFlight.size === 0) break;
          const w = Atomics.waitAsync(this.ctl, CTL.GROUP_DONE, seen);
          if (w.async) {
            // A pending waitAsync does not keep Node's event loop alive: this timer does, while copies are in flight.
            const keep = setTimeout(() => {}, 2 ** 30);
            try {
              await w.value;
            } finally {
              clearTimeout(keep);
            }
          }
        }
      } finally {
        this.pumping = false;
      }
    })();
  }

  private settle(): void {
    for (const [g, p] of this.inFlight) {
      if (Atomics.load(this.groups, g) !== 0) continue;
      this.inFlight.delete(g);
      this.freeGroups.push(g);
      const code = Atomics.load(this.status, g);
      if (p.resolveWith) {
        if (code === 0) p.resolveWith(Number(Atomics.load(this.where, g)));
        else
          p.reject(new GpuError(ErrorCode.NATIVE, `pinned allocation of ${p.entries[3]!} bytes on a copier thread failed (status ${code})`, { status: code }));
      } else if (code === 0) p.resolve();
      else p.reject(ioError(p.what, code, Number(Atomics.load(this.where, g)), p.entries));
    }
    while (this.queued.length > 0 && this.freeGroups.length > 0) this.post(this.queued.shift()!);
  }

  private fail(e: unknown): void {
    for (const p of [...this.inFlight.values(), ...this.queued]) p.reject(e);
    this.inFlight.clear();
    this.queued.length = 0;
  }

  /** Waits on this thread until every copy posted (and queued) has finished; the threads keep running. */
  waitIdle(): void {
    while ((this.inFlight.size > 0 || this.queued.length > 0) && !this.failure) {
      const seen = Atomics.load(this.ctl, CTL.GROUP_DONE);
      this.settle();
      if (this.inFlight.size > 0) Atomics.wait(this.ctl, CTL.GROUP_DONE, seen, 1000);
    }
  }

  /**
   * Stops the threads. Copies already posted are waited for on this thread (the memory they touch may be freed
   * next); queued ones are refused.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const p of this.queued) p.reject(new DisposedError('the host copier was disposed before the copy started'));
    this.queued.length = 0;
    this.waitIdle();
    Atomics.store(this.ctl, CTL.STOP, 1);
    for (let i = 0; i < this.threads; i++) Atomics.notify(this.ctl, CTL.mailbox(i));
    // A thread still loading its modules may be inside koffi's native initialisation, and terminating it there aborts
    // the whole process (napi_throw during addon registration, seen when a copier was disposed right after it was
    // made): such a thread is terminated when it says it has loaded (see the constructor).
    for (const w of this.workers) if (this.loaded.has(w)) void w.terminate();
  }
}

/**
 * Cuts entries into parts of about total / threads bytes (at least 64 KiB, at 4 KiB boundaries), so that one large
 * copy spreads over every thread and many small ones are grouped; a read's bytes needed follow its parts. Answers
 * the entries themselves when none is cut.
 */
function split(entries: Entries, threads: number): Entries {
  const n = entries.length / F;
  let total = 0;
  for (let i = 0; i < n; i++) total += entries[i * F + 3]!;
  if (total === 0) return new Float64Array(0);
  const per = partBytes(total, threads);
  let parts = 0;
  for (let i = 0; i < n; i++) parts += Math.max(1, Math.ceil(entries[i * F + 3]! / per));
  if (parts === n) return entries;
  const out = new Float64Array(parts * F);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const e = i * F;
    const len = entries[e + 3]!;
    if (len <= per) {
      out.set(entries.subarray(e, e + F), at);
      at += F;
      continue;
    }
    const [op, a, b, , off, need] = [entries[e]!, entries[e + 1]!, entries[e + 2]!, len, entries[e + 4]!, entries[e + 5]!];
    for (let o = 0; o < len; o += per, at += F) {
      const part = Math.min(per, len - o);
      // A copy moves both addresses; a file operation keeps its descriptor and moves the buffer and the file offset.
      out[at] = op;
      out[at + 1] = op === OP.COPY ? a + o : a;
      out[at + 2] = b + o;
      out[at + 3] = part;
      out[at + 4] = op === OP.COPY ? 0 : off + o;
      out[at + 5] = op === OP.COPY ? part : Math.max(0, Math.min(part, need - o));
    }
  }
  return out;
}

/** The size split() cuts parts to: about total / threads, at least 64 KiB, at 4 KiB boundaries. */
function partBytes(total: number, threads: number): number {
  return Math.max(MIN_PART, Math.ceil(total / threads / PART_ALIGN) * PART_ALIGN);
}

function ioError(what: string, code: number, at: number, entries: Entries): GpuError {
  if (code === END_OF_FILE) {
    let end = 0;
    for (let i = 0; i < entries.length; i += F) end = Math.max(end, entries[i + 4]! + entries[i + 5]!);
    // Threads stop at the first failure of their copy, so the lowest offset seen may be past the end: ask the file.
    let size = at;
    try {
      size = Math.min(at, fstatSync(entries[1]!).size);
    } catch {
      // the descriptor was closed meanwhile: keep the offset the threads saw
    }
    return new GpuError(ErrorCode.IO_ERROR, `the file ended at byte ${size}, before byte ${end} the read needed (was it truncated during the read?)`, {
      statusName: 'EOF',
    });
  }
  const name = errnoNames.get(code) ?? `errno ${code}`;
  return new GpuError(ErrorCode.IO_ERROR, `${what} failed at byte ${at}: ${name}`, { status: code, statusName: name });
}
