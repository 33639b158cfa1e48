/** The pinned ring with slots pinned elsewhere: what a transfer finds when the threads' answers wait to be seen. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openRuntime } from '../runtime/runtime.js';
import { Ring, type Pinner } from './ring.js';

const KiB = 1024;

/** Pins at once (as a copier thread would, with the host backend's allocator) but answers only when polled or flushed. */
function heldPinner(rt: ReturnType<typeof openRuntime>): Pinner & { asked: number; flush(): void } {
  let ready: Array<() => void> = [];
  const p = {
    asked: 0,
    pin(bytes: number, landed: (address: number) => void): Promise<number> {
      p.asked++;
      const address = rt.backend.hostAlloc(0, bytes, { portable: true });
      return new Promise<number>((resolve) => {
        ready.push(() => {
          landed(address);
          resolve(address);
        });
      });
    },
    poll(): void {
      const now = ready;
      ready = [];
      for (const f of now) f();
    },
    flush(): void {
      p.poll();
    },
  };
  return p;
}

test('a transfer that finds no free slot takes the slots the threads pinned meanwhile at once, without waiting a turn', () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 64 * 2 ** 20 } });
  const pinner = heldPinner(rt);
  const ring = new Ring(rt, 0, 64 * KiB, 4, undefined, () => pinner);
  try {
    ring.warm();
    assert.equal(pinner.asked, 4, 'warming asks the threads for the whole ring');
    assert.equal(ring.size, 0, 'nothing has landed before anyone looks');
    const s = ring.tryAcquire();
    assert.ok(s, 'the poll in tryAcquire lands the pinned slots in the same turn');
    assert.equal(ring.size, 4, 'every answered pin became a slot');
    assert.equal(pinner.asked, 4, 'no slot was pinned twice');
    const others = [ring.tryAcquire(), ring.tryAcquire(), ring.tryAcquire()];
    assert.ok(others.every((x) => x !== undefined));
    assert.equal(ring.tryAcquire(), undefined, 'a full ring in use has no slot to give');
    ring.release(s);
    assert.equal(ring.tryAcquire(), s, 'a released slot is given again');
    assert.equal(rt.liveMemory().pinned.count, 0, "the ring's slots are not the program's memory");
  } finally {
    ring.dispose();
  }
});

test('slots that land after the ring is disposed are given back, and a pin that fails leaves the ring to grow on its own', async () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 64 * 2 ** 20 } });
  const pinner = heldPinner(rt);
  const ring = new Ring(rt, 0, 64 * KiB, 2, undefined, () => pinner);
  ring.warm();
  ring.dispose();
  pinner.flush();
  assert.equal(ring.size, 0, 'nothing joins a disposed ring');
  let rejected = 0;
  const failing: Pinner = {
    pin: () => {
      rejected++;
      return Promise.reject(new Error('locked-memory limit'));
    },
    poll: () => {},
  };
  const grows = new Ring(rt, 0, 64 * KiB, 2, undefined, () => failing);
  try {
    grows.warm();
    await new Promise((r) => setImmediate(r));
    assert.equal(rejected, 2);
    const s = grows.acquire();
    assert.ok(!(s instanceof Promise), 'with no pin pending the ring pins its slot itself');
    assert.equal(grows.size, 1);
  } finally {
    grows.dispose();
  }
});
