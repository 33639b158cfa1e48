/**
 * The shared-memory layout between the host copier and its threads (host-copier.ts, host-copier-worker.ts).
 *
 * A request (a copy, a gather, a file read or write, a pin) becomes a group: a list of entries, each one operation
 * on raw addresses (a memcpy, a pread into host memory, a pwrite from it, a pinned allocation). The list is cut into
 * at most one job per thread, each job a run of consecutive entries, so a gather of many small copies costs one job
 * per thread, not one per copy. ("Job" means only that here: one thread's share of a group. A request is pending
 * from its call until its answer is seen on the JS thread.)
 *
 * Who owns what:
 * - A group's slot g (its list, status[g], where[g], groups[g]) is the JS thread's while g is free. The JS thread
 *   writes the list and resets status[g] and where[g], then hands g over with Atomics.store(groups[g], jobs); from
 *   then on only the threads write status[g] (the first failure) and where[g] (a failure's offset, a pin's
 *   address), each decrementing groups[g] once its job is done. The JS thread takes g back when it reads
 *   groups[g] === 0 (the thread that brought it to 0 has added 1 to GROUP_DONE and woken it).
 * - Thread i's mailbox is a ring of RING jobs: the JS thread writes a job's fields, then publishes it by storing the
 *   posted counter (mailbox(i)); only thread i reads the job and stores the done counter (mailbox(i) + 1). At most
 *   MAX_GROUPS groups are in flight and each puts at most one job in a mailbox, so posted - done never exceeds RING.
 *   Thread i sets its sleeping word (mailbox(i) + 2) to ASLEEP before it waits on its posted counter and back to
 *   AWAKE after; the JS thread does not wake it (Atomics.notify, a system call where it sleeps) when it reads AWAKE
 *   there after storing the counter. No job is left unseen: all of these are sequentially consistent, so when the
 *   JS thread reads AWAKE, the thread's store of ASLEEP comes after the counter's store, and its wait (which compares
 *   the counter first) returns at once (the lock-free wake-up test of a futex-based mutex, Drepper's "Futexes Are
 *   Tricky", mutex 2).
 * - Waking is claimed: whoever wakes a sleeping thread first turns its word from ASLEEP to WAKING with a
 *   compare-exchange, and only the one that succeeds calls notify. The JS thread wakes at most one of the threads it
 *   posted a request's jobs to; every thread, each time its wait returns, claims and wakes up to two other threads
 *   that sleep with jobs posted (a tree of wake-ups: the system calls are made on the copier's threads, in
 *   parallel, not one per thread on the JS thread). None is missed: a thread left asleep with a job would be one no
 *   scan claimed, but each claim makes one more thread that scans, and the scans stop only once a scan claims fewer
 *   than two, having seen every thread; a thread that stores ASLEEP after a scan passed it finds its counter moved
 *   and does not sleep (the test above).
 * - STOP and the pin configuration are written by the JS thread only (the configuration once, before any pin).
 * - Everything else of the copier (the free groups, the requests in flight and queued) is the JS thread's alone;
 *   each thread keeps only its own bindings of libc and the runtime's allocator.
 */

/** Jobs each thread's mailbox holds (a power of two: counters wrap and are masked). */
export const RING = 64;
/** Fields of one job, as float64: group, first entry, entry count. */
export const JOB_FIELDS = 3;
/** Groups (copies) in flight at most: each puts at most one job in a thread's mailbox, so a mailbox never overflows. */
export const MAX_GROUPS = RING;
/** Entries a group's list holds; longer lists are cut into several groups. */
export const LIST_CAP = 512;
/** Fields of one entry, as float64: operation, a, b, bytes, file offset, bytes needed (a read may end early after them). */
export const ENTRY_FIELDS = 6;

/** Entry operations. */
export const OP = {
  /** memcpy(a = dst, b = src, bytes). */
  COPY: 0,
  /** pread(fd = a, buf = b, bytes, offset): the file's bytes into host memory. */
  READ: 1,
  /** pwrite(fd = a, buf = b, bytes, offset): host memory into the file. */
  WRITE: 2,
  /**
   * Pinned host memory of `bytes` (a = flags) from the runtime's own allocator (cudaHostAlloc / hipHostMalloc, named
   * in the pin configuration); the address lands in the group's result word.
   */
  PIN: 3,
} as const;

/** Bytes of the shared pin configuration: the runtime library's path and the allocator's name, NUL-separated. */
export const PIN_CONFIG_BYTES = 4096;

/** A group's status: 0 while fine; else the first failure (errno > 0, or END_OF_FILE). */
export const END_OF_FILE = -1;

/** A thread's sleeping word (CTL.mailbox(i) + 2). */
export const SLEEP = { AWAKE: 0, ASLEEP: 1, WAKING: 2 } as const;

/** Threads a thread wakes, at most, each time its wait returns. */
export const WAKE_FANOUT = 2;

/** Indices in the Int32 control array. */
export const CTL = {
  /** Set to 1 to stop the threads once their mailboxes are empty. */
  STOP: 0,
  /** Counts completed groups; the main thread waits on it. */
  GROUP_DONE: 1,
  /** Thread i's posted and done counters are at mailbox(i) and mailbox(i) + 1, its sleeping word at mailbox(i) + 2. */
  mailbox: (i: number): number => 2 + 3 * i,
  /** Length of the control array for `threads` threads. */
  length: (threads: number): number => 2 + 3 * threads,
} as const;
