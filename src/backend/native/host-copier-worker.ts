/**
 * One thread of the host copier: waits on its mailbox in shared memory, copies each job with libc memcpy, and
 * counts the job's group down; the thread that finishes a group wakes the main thread. See host-copier.ts.
 */
import { workerData } from 'node:worker_threads';
import { libcMemcpy } from './ffi.js';
import { CTL, JOB_FIELDS, RING } from './host-copier-layout.js';

const {
  ctl: ctlBuffer,
  params: paramsBuffer,
  groups: groupsBuffer,
  index,
} = workerData as {
  ctl: SharedArrayBuffer;
  params: SharedArrayBuffer;
  groups: SharedArrayBuffer;
  index: number;
};
const ctl = new Int32Array(ctlBuffer);
const params = new Float64Array(paramsBuffer);
const groups = new Int32Array(groupsBuffer);
const memcpy = libcMemcpy();
const POSTED = CTL.mailbox(index);
const DONE = POSTED + 1;
const base = index * RING * JOB_FIELDS;

for (;;) {
  const posted = Atomics.load(ctl, POSTED);
  const done = Atomics.load(ctl, DONE);
  if (done === posted) {
    if (Atomics.load(ctl, CTL.STOP) !== 0) break;
    Atomics.wait(ctl, POSTED, posted);
    continue;
  }
  const at = base + (done & (RING - 1)) * JOB_FIELDS;
  memcpy(params[at]!, params[at + 1]!, params[at + 2]!);
  const group = params[at + 3]!;
  Atomics.store(ctl, DONE, (done + 1) | 0);
  if (Atomics.sub(groups, group, 1) === 1) {
    Atomics.add(ctl, CTL.GROUP_DONE, 1);
    Atomics.notify(ctl, CTL.GROUP_DONE);
  }
}
