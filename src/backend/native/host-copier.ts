/**
 * Host-to-host copies on parallel threads: the chunk copies of a staged transfer (pageable memory into pinned
 * chunks and back). A pool of worker threads, each calling libc memcpy through koffi, is fed through mailboxes in
 * shared memory (Atomics), and a copy is split into one part per thread.
 *
 * Why not koffi's asynchronous calls: they run on libuv's thread pool, 4 threads unless UV_THREADPOOL_SIZE was set
 * before its first use, shared with the file system, zlib, DNS and gpumem's own stream waits (each holds a thread
 * while it waits); and each call allocates its work item. A dedicated pool sized for the machine copies in
 * parallel whatever else the process does, and posting a part costs a few stores and one notify.
 */
import { Worker } from 'node:worker_threads';
import { DisposedError } from '../../errors.js';
import type { Address, HostCopier } from '../backend.js';
import { CTL, JOB_FIELDS, MAX_GROUPS, RING } from './host-copier-layout.js';

/** Parts are cut at this granularity so that two threads never write the same page. */
const PART_ALIGN = 4096;

interface Pending {
  dst: Address;
  src: Address;
  bytes: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class ThreadedHostCopier implements HostCopier {
  readonly threads: number;
  private readonly ctl: Int32Array;
  private readonly params: Float64Array;
  private readonly groups: Int32Array;
  private readonly workers: Worker[] = [];
  private readonly freeGroups: number[] = [];
  private readonly inFlight = new Map<number, Pending>();
  private readonly queued: Pending[] = [];
  private next = 0;
  private pumping = false;
  private disposed = false;
  private failure: Error | undefined;

  constructor(threads: number) {
    this.threads = threads;
    this.ctl = new Int32Array(new SharedArrayBuffer(4 * CTL.length(threads)));
    this.params = new Float64Array(new SharedArrayBuffer(8 * threads * RING * JOB_FIELDS));
    this.groups = new Int32Array(new SharedArrayBuffer(4 * MAX_GROUPS));
    for (let g = MAX_GROUPS - 1; g >= 0; g--) this.freeGroups.push(g);
    const url = new URL('./host-copier-worker.js', import.meta.url);
    for (let i = 0; i < threads; i++) {
      const w = new Worker(url, { workerData: { ctl: this.ctl.buffer, params: this.params.buffer, groups: this.groups.buffer, index: i } });
      w.unref();
      w.on('error', (e) => {
        this.failure = e;
        this.fail(e);
      });
      this.workers.push(w);
    }
  }

  copy(dst: Address, src: Address, bytes: number): Promise<void> {
    if (this.disposed) return Promise.reject(new DisposedError('the host copier was disposed'));
    if (this.failure) return Promise.reject(this.failure);
    if (bytes === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const p: Pending = { dst, src, bytes, resolve, reject };
      if (this.freeGroups.length > 0) this.post(p);
      else this.queued.push(p);
      this.pump();
    });
  }

  /** Splits a copy into parts, one per thread (fewer when it is small), and posts them. */
  private post(p: Pending): void {
    const g = this.freeGroups.pop()!;
    const per = Math.max(PART_ALIGN, Math.ceil(p.bytes / this.threads / PART_ALIGN) * PART_ALIGN);
    const parts = Math.ceil(p.bytes / per);
    Atomics.store(this.groups, g, parts);
    this.inFlight.set(g, p);
    for (let i = 0; i < parts; i++) {
      const w = this.next;
      this.next = (this.next + 1) % this.threads;
      const posted = Atomics.load(this.ctl, CTL.mailbox(w));
      const at = (w * RING + (posted & (RING - 1))) * JOB_FIELDS;
      const off = i * per;
      this.params[at] = p.dst + off;
      this.params[at + 1] = p.src + off;
      this.params[at + 2] = Math.min(per, p.bytes - off);
      this.params[at + 3] = g;
      Atomics.store(this.ctl, CTL.mailbox(w), (posted + 1) | 0);
      Atomics.notify(this.ctl, CTL.mailbox(w), 1);
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
      p.resolve();
    }
    while (this.queued.length > 0 && this.freeGroups.length > 0) this.post(this.queued.shift()!);
  }

  private fail(e: unknown): void {
    for (const p of [...this.inFlight.values(), ...this.queued]) p.reject(e);
    this.inFlight.clear();
    this.queued.length = 0;
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
    while (this.inFlight.size > 0 && !this.failure) {
      const seen = Atomics.load(this.ctl, CTL.GROUP_DONE);
      this.settle();
      if (this.inFlight.size > 0) Atomics.wait(this.ctl, CTL.GROUP_DONE, seen, 1000);
    }
    Atomics.store(this.ctl, CTL.STOP, 1);
    for (let i = 0; i < this.threads; i++) Atomics.notify(this.ctl, CTL.mailbox(i));
    for (const w of this.workers) void w.terminate();
  }
}
