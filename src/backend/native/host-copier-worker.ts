/**
 * One thread of the host copier: waits on its mailbox in shared memory, runs each job's entries (memcpy, pread,
 * pwrite through libc) and counts the job's group down; the thread that finishes a group wakes the main thread. A
 * failing entry records the group's first failure (errno, or the end of the file before the bytes needed) and the
 * job's later entries are skipped. See host-copier.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { hostAllocator, libcIo } from './host-io/ffi.js';
import { CTL, END_OF_FILE, ENTRY_FIELDS, JOB_FIELDS, LIST_CAP, OP, RING, SLEEP, WAKE_FANOUT } from './host-copier-layout.js';

const shared = workerData as {
  ctl: SharedArrayBuffer;
  params: SharedArrayBuffer;
  groups: SharedArrayBuffer;
  lists: SharedArrayBuffer;
  status: SharedArrayBuffer;
  where: SharedArrayBuffer;
  pin: SharedArrayBuffer;
  index: number;
  /** Microseconds a thread spins on its empty mailbox before it sleeps (back-to-back copies find it awake). */
  spinMicros: number;
  /** Threads of the copier (the mailboxes this thread looks at when it wakes). */
  threads: number;
};
const ctl = new Int32Array(shared.ctl);
const params = new Float64Array(shared.params);
const groups = new Int32Array(shared.groups);
const lists = new Float64Array(shared.lists);
const status = new Int32Array(shared.status);
const where = new BigInt64Array(shared.where);
const pinConfig = new Uint8Array(shared.pin);
let pinned: ((bytes: number, flags: number) => { address: number } | { status: number }) | undefined;
const libc = libcIo();
const POSTED = CTL.mailbox(shared.index);
const DONE = POSTED + 1;
const SLEEPING = POSTED + 2;
const base = shared.index * RING * JOB_FIELDS;

/** Records a failure: an errno wins over the end of the file; of several, the lowest file offset is kept. */
function fail(group: number, code: number, at: number): void {
  const was = Atomics.compareExchange(status, group, 0, code);
  if (was === END_OF_FILE && code > 0) Atomics.store(status, group, code);
  const mine = BigInt(at);
  let cur = Atomics.load(where, group);
  while (mine < cur) {
    const prev = Atomics.compareExchange(where, group, cur, mine);
    if (prev === cur) break;
    cur = prev;
  }
}

/** Runs one entry; false when it failed (the failure is recorded). */
function run(group: number, e: number): boolean {
  const op = lists[e]!;
  const a = lists[e + 1]!;
  const b = lists[e + 2]!;
  const n = lists[e + 3]!;
  const off = lists[e + 4]!;
  if (op === OP.COPY) {
    libc.memcpy(a, b, n);
    return true;
  }
  if (op === OP.PIN) {
    if (!pinned) {
      const [library = '', symbol = ''] = new TextDecoder().decode(pinConfig.subarray(0, pinConfig.indexOf(0, pinConfig.indexOf(0) + 1))).split('\0');
      pinned = hostAllocator(library, symbol);
    }
    const r = pinned(n, a);
    if ('status' in r) {
      fail(group, r.status, 0);
      return false;
    }
    Atomics.store(where, group, BigInt(r.address));
    return true;
  }
  const need = lists[e + 5]!;
  let done = 0;
  while (done < n) {
    const r = op === OP.READ ? libc.pread(a, b + done, n - done, off + done) : libc.pwrite(a, b + done, n - done, off + done);
    if (r < 0) {
      fail(group, -r, off + done);
      return false;
    }
    if (r === 0) break;
    done += r;
    // An O_DIRECT read ends early at the end of the file, past the bytes needed: the rest is alignment padding.
    if (done >= need && done < n && r % 4096 !== 0) break;
  }
  if (done < need) {
    fail(group, END_OF_FILE, off + done);
    return false;
  }
  return true;
}

/** Claims and wakes up to WAKE_FANOUT other threads that sleep with a job posted (host-copier-layout.ts). */
function wakeOthers(): void {
  let woken = 0;
  for (let k = 1; k < shared.threads && woken < WAKE_FANOUT; k++) {
    const j = (shared.index + k) % shared.threads;
    const box = CTL.mailbox(j);
    if (Atomics.load(ctl, box + 2) !== SLEEP.ASLEEP || Atomics.load(ctl, box) === Atomics.load(ctl, box + 1)) continue;
    if (Atomics.compareExchange(ctl, box + 2, SLEEP.ASLEEP, SLEEP.WAKING) !== SLEEP.ASLEEP) continue;
    Atomics.notify(ctl, box, 1);
    woken++;
  }
}

// Tell the main thread the modules are loaded: terminating the thread is safe from here on.
parentPort?.postMessage('loaded');

for (;;) {
  const posted = Atomics.load(ctl, POSTED);
  const done = Atomics.load(ctl, DONE);
  if (done === posted) {
    if (Atomics.load(ctl, CTL.STOP) !== 0) break;
    // Spin a little before sleeping: the next part of a transfer usually arrives within microseconds.
    const until = performance.now() + shared.spinMicros / 1000;
    while (Atomics.load(ctl, POSTED) === posted && performance.now() < until) {}
    if (Atomics.load(ctl, POSTED) === posted) {
      // Said before the wait, which compares the counter again: a job posted meanwhile is not missed (layout.ts).
      Atomics.store(ctl, SLEEPING, SLEEP.ASLEEP);
      Atomics.wait(ctl, POSTED, posted);
      Atomics.store(ctl, SLEEPING, SLEEP.AWAKE);
      // Whoever woke this thread may have left others asleep with jobs: they are this thread's to wake.
      wakeOthers();
    }
    continue;
  }
  const at = base + (done & (RING - 1)) * JOB_FIELDS;
  const group = params[at]!;
  const first = params[at + 1]!;
  const count = params[at + 2]!;
  const list = group * LIST_CAP * ENTRY_FIELDS;
  for (let i = 0; i < count; i++) {
    if (Atomics.load(status, group) !== 0) break;
    if (!run(group, list + (first + i) * ENTRY_FIELDS)) break;
  }
  Atomics.store(ctl, DONE, (done + 1) | 0);
  if (Atomics.sub(groups, group, 1) === 1) {
    Atomics.add(ctl, CTL.GROUP_DONE, 1);
    Atomics.notify(ctl, CTL.GROUP_DONE);
  }
}
