/** The shared-memory layout between the host copier and its threads (host-copier.ts, host-copier-worker.ts). */

/** Jobs each thread's mailbox holds (a power of two: counters wrap and are masked). */
export const RING = 64;
/** Fields of one job, as float64: destination, source, bytes, group. */
export const JOB_FIELDS = 4;
/** Groups (copies) in flight at most: each puts at most one job in a thread's mailbox, so a mailbox never overflows. */
export const MAX_GROUPS = RING;

/** Indices in the Int32 control array. */
export const CTL = {
  /** Set to 1 to stop the threads once their mailboxes are empty. */
  STOP: 0,
  /** Counts completed groups; the main thread waits on it. */
  GROUP_DONE: 1,
  /** Thread i's posted and done counters are at mailbox(i) and mailbox(i) + 1. */
  mailbox: (i: number): number => 2 + 2 * i,
  /** Length of the control array for `threads` threads. */
  length: (threads: number): number => 2 + 2 * threads,
} as const;
