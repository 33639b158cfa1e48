/**
 * FSDP2 (fully_shard) on the caching allocator: its gradient shards come from the reduce-scatter stream, whose freed
 * blocks the next forward pass cannot reuse, and a shard group of one GPU gathers nothing (the shards are copied).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ONE_GPU, trainOptions } from '../../testing/plan-options.js';
import { catalogueModel } from '../catalogue.js';
import { estimate } from '../estimate.js';
import { replayRun } from '../train.js';

const GiB = 2 ** 30;
const m = catalogueModel('llama-3.2-1b');
const oneGpu = { ...ONE_GPU, zero: 3 as const };
const run = (sharding: 'fsdp1' | 'fsdp2', gpus = 1) => trainOptions({ batch: 4, seq: 512, sharding, parallel: { ...oneGpu, gpus }, fragmentation: undefined });

test("FSDP2 on one GPU reserves more than FSDP1 on the same model: fp32 copies of its units beside autocast's, the root's held all step", () => {
  const one = replayRun(m, run('fsdp1'));
  const two = replayRun(m, run('fsdp2'));
  assert.ok(one && two);
  // the root unit (the tied embedding and output layer) unsharded in fp32 from its forward pass to its backward pass
  const root = m.vocab * m.hidden * 4;
  assert.ok(
    two.peakAllocatedBytes > one.peakAllocatedBytes + root / 2,
    `allocated: FSDP2 ${two.peakAllocatedBytes / GiB} GiB, FSDP1 ${one.peakAllocatedBytes / GiB} GiB`,
  );
  assert.ok(
    two.peakReservedBytes > one.peakReservedBytes + root,
    `reserved: FSDP2 ${two.peakReservedBytes / GiB} GiB, FSDP1 ${one.peakReservedBytes / GiB} GiB`,
  );
});

test('FSDP2 on one GPU gathers nothing: the blocks compute under autocast from fp32 copies of the shards; over 8 GPUs from bf16 gathers', () => {
  const alone = estimate(m, run('fsdp2'));
  assert.ok(alone.autocastCacheBytes > 0, "param_dtype casts nothing without an all-gather: autocast's copies are made");
  const eight = estimate(m, run('fsdp2', 8));
  assert.equal(eight.autocastCacheBytes, 0);
});
