/**
 * Streams of the host backend: ordered queues of JS operations. Work runs in order within a stream, later on the
 * event loop (setImmediate), as a GPU runs it later than it is enqueued. A stream that waits on an event stops
 * until the record it waits for has run. Blocking calls drain the queues inline, so nothing here can deadlock.
 */

export interface HostEventState {
  device: number;
  timing: boolean;
  /** Ticket of the most recent record enqueued, and of the most recent one that ran. */
  enqueued: number;
  completed: number;
  /** performance.now() when the last record ran. */
  time: number | undefined;
}

type Op = { kind: 'run'; run: () => void } | { kind: 'wait'; event: HostEventState; ticket: number };

export class HostQueue {
  readonly ops: Op[] = [];
  private head = 0;

  constructor(readonly device: number) {}

  /** Ops enqueued and not run yet. */
  get queued(): number {
    return this.ops.length - this.head;
  }

  push(op: Op): void {
    this.ops.push(op);
  }

  /** Drops everything still queued (after a fault, as a GPU drops the work of a corrupt context). */
  clear(): void {
    this.ops.length = 0;
    this.head = 0;
  }

  /** Runs ops until the queue is empty or blocked; answers whether anything ran. */
  step(): boolean {
    let ran = false;
    while (this.head < this.ops.length) {
      const op = this.ops[this.head]!;
      if (op.kind === 'wait' && op.event.completed < op.ticket) break;
      this.head++;
      ran = true;
      if (op.kind === 'run') op.run();
    }
    if (this.head > 1024 && this.head * 2 > this.ops.length) {
      this.ops.splice(0, this.head);
      this.head = 0;
    }
    return ran;
  }
}

/** All queues of one host backend, and the scheduling that runs them. */
export class HostScheduler {
  private readonly queues = new Set<HostQueue>();
  private scheduled = false;
  private readonly waiters: Array<() => void> = [];
  /** Set by the backend: an exception thrown by an op (a kernel touching memory it does not own). */
  onError: (e: unknown) => void = () => {};

  add(q: HostQueue): void {
    this.queues.add(q);
  }

  delete(q: HostQueue): void {
    this.queues.delete(q);
  }

  enqueue(q: HostQueue, run: () => void): void {
    q.push({ kind: 'run', run });
    this.schedule();
  }

  wait(q: HostQueue, event: HostEventState): void {
    q.push({ kind: 'wait', event, ticket: event.enqueued });
    this.schedule();
  }

  /** Runs every queue until all are empty (or blocked, which cannot last: waits only name earlier records). */
  drain(): void {
    let progress = true;
    while (progress) {
      progress = false;
      for (const q of this.queues) {
        try {
          if (q.step()) progress = true;
        } catch (e) {
          for (const other of this.queues) other.clear();
          this.onError(e);
          progress = false;
          break;
        }
      }
    }
    const ws = this.waiters.splice(0);
    for (const w of ws) w();
  }

  /** Resolves once the queues have drained on the event loop. */
  settled(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.drain();
    });
  }
}
