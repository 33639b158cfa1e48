/**
 * The host backend's lists of copies (a chunk's gather and scatter on its copier, a batched copy): every copy lands
 * as a copy of its own would, between the backend's memory and JS buffers, in the order listed; a copy from a
 * detached buffer or at an address outside every allocation fails as a copy of its own fails.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHostBackend } from './host-backend.js';

const fill = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

test('a list of copies lands each copy in order: into and out of one slot, between JS buffers, within one allocation', async () => {
  const b = createHostBackend();
  const copier = b.createHostCopier(2);
  try {
    const slot = b.hostAlloc(0, 4096, {});
    const dev = b.malloc(0, 4096);
    const ins = [fill(100, 1), fill(300, 2), fill(50, 3)];
    const outs = ins.map((a) => new Uint8Array(a.length));
    const inAt = ins.map((a) => b.adoptHostBuffer(a.buffer as ArrayBuffer));
    const outAt = outs.map((a) => b.adoptHostBuffer(a.buffer as ArrayBuffer));
    // Gather into the slot back to back, with a copy of no bytes between; then the slot's first bytes over its end.
    await copier.copyMany!([slot, slot + 100, slot + 100, slot + 400], [inAt[0]!, inAt[1]!, inAt[2]!, inAt[2]!], [100, 300, 0, 50]);
    b.memcpy(dev, slot, 450, 1);
    // Within one allocation (the later copy reads what the earlier wrote), then scattered out.
    await copier.copyMany!([slot + 1000, slot + 2000], [slot, slot + 1000], [450, 450]);
    await copier.copyMany!([outAt[0]!, outAt[1]!, outAt[2]!], [slot + 2000, slot + 2100, slot + 2400], [100, 300, 50]);
    outs.forEach((o, i) => assert.deepEqual(o, ins[i], `buffer ${i}`));
    const back = new Uint8Array(450);
    b.memcpy(b.adoptHostBuffer(back.buffer), dev, 450, 2);
    assert.deepEqual(back, Uint8Array.from([...ins[0]!, ...ins[1]!, ...ins[2]!]));
  } finally {
    copier.dispose();
  }
});

test('a copy in a list from a detached buffer, or at an address outside every allocation, fails as a copy alone does', async () => {
  const b = createHostBackend();
  const copier = b.createHostCopier(2);
  try {
    const slot = b.hostAlloc(0, 4096, {});
    const a = fill(64, 5);
    const at = b.adoptHostBuffer(a.buffer as ArrayBuffer);
    structuredClone(a.buffer, { transfer: [a.buffer as ArrayBuffer] });
    const alone = await copier.copy(slot, at, 64).then(
      () => assert.fail('a detached buffer was read'),
      (e: Error) => e,
    );
    await assert.rejects(copier.copyMany!([slot, slot + 64], [slot + 128, at], [64, 64]), (e: Error) => e.constructor === alone.constructor);
    const stray = slot + 1e6;
    const strayAlone = await copier.copy(slot, stray, 8).then(
      () => assert.fail('a stray address was read'),
      (e: Error) => e,
    );
    assert.match(strayAlone.message, /illegal address/);
    await assert.rejects(copier.copyMany!([slot, slot + 8], [slot + 16, stray], [8, 8]), { message: strayAlone.message });
  } finally {
    copier.dispose();
  }
});
