/**
 * The caching allocator model against the rules of PyTorch's CUDACachingAllocator (defaults: 512-byte rounding,
 * 2 MiB small segments, 20 MiB segments for requests under 10 MiB, larger ones rounded to 2 MiB, best fit, a block
 * split only when the rest is worth it, merging only within a segment).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_ALLOC_CONF } from './alloc-conf.js';
import { roundSize, segmentSize, TorchAllocatorModel } from './torch-caching.js';

const MiB = 1024 * 1024;

test('requests are rounded to 512 bytes and get the segment PyTorch asks cudaMalloc for', () => {
  assert.equal(roundSize(1), 512, 'the smallest block is 512 bytes');
  assert.equal(roundSize(513), 1024);
  assert.equal(segmentSize(roundSize(1)), 2 * MiB, 'up to 1 MiB: the small pool, 2 MiB segments');
  assert.equal(segmentSize(roundSize(MiB + 1)), 20 * MiB, 'between 1 and 10 MiB: a 20 MiB segment shared by such requests');
  assert.equal(segmentSize(11 * MiB + 1), 12 * MiB, 'from 10 MiB: the request rounded up to 2 MiB');
  const al = new TorchAllocatorModel();
  al.alloc(1);
  al.alloc(3 * MiB);
  al.alloc(3 * MiB);
  const s = al.stats();
  assert.equal(s.reservedBytes, 22 * MiB, 'one small segment and one 20 MiB segment that holds both 3 MiB blocks');
  assert.equal(s.allocatedBytes, 512 + 6 * MiB, 'allocated counts the rounded blocks');
  assert.equal(s.segments, 2);
});

test('a request takes the smallest free block that holds it, and a rest of at most 1 MiB is not split off', () => {
  const al = new TorchAllocatorModel();
  const big = al.alloc(30 * MiB);
  const mid = al.alloc(12 * MiB);
  al.free(big);
  al.free(mid);
  al.alloc(11.5 * MiB);
  // best fit: the 12 MiB block, whose 0.5 MiB rest is too small to split (more than 1 MiB is needed), so the whole
  // block counts as allocated; the 30 MiB block stays free
  assert.equal(al.stats().allocatedBytes, 12 * MiB);
  assert.equal(al.stats().reservedBytes, 42 * MiB, 'no new segment');
  al.alloc(20 * MiB);
  assert.equal(al.stats().allocatedBytes, 32 * MiB, 'the 30 MiB block is split: its 10 MiB rest stays free');
  al.alloc(10 * MiB);
  assert.equal(al.stats().reservedBytes, 42 * MiB, 'the split-off rest serves a request of its size');
});

test('freed blocks merge with free neighbours in their segment, never across segments', () => {
  const al = new TorchAllocatorModel();
  const a = al.alloc(12 * MiB);
  const b = al.alloc(12 * MiB);
  al.free(a);
  al.free(b);
  al.alloc(20 * MiB);
  // 24 MiB are free, in two segments of 12: neither holds 20 MiB, so the allocator asks for a new segment
  assert.equal(al.stats().reservedBytes, 44 * MiB);

  const one = new TorchAllocatorModel();
  const s = one.alloc(40 * MiB);
  one.free(s);
  const p = one.alloc(15 * MiB);
  const q = one.alloc(15 * MiB);
  one.free(p);
  one.free(q);
  // the two halves merged back with the segment's rest: the whole segment serves a 40 MiB request again
  one.alloc(40 * MiB);
  assert.equal(one.stats().reservedBytes, 40 * MiB);
});

test('reserved memory only grows until empty_cache(), which returns the segments with nothing in them', () => {
  const al = new TorchAllocatorModel();
  const a = al.alloc(100 * MiB);
  const b = al.alloc(50 * MiB);
  al.free(a);
  assert.equal(al.stats().reservedBytes, 150 * MiB, 'a freed block stays cached');
  al.emptyCache();
  assert.equal(al.stats().reservedBytes, 50 * MiB, 'the free segment went back; the one holding b did not');
  al.free(b);
  al.emptyCache();
  assert.equal(al.stats().reservedBytes, 0);
  assert.equal(al.stats().peakReservedBytes, 150 * MiB, 'the peak remembers');
  al.resetPeaks();
  assert.equal(al.stats().peakReservedBytes, 0, 'reset_peak_memory_stats() starts the peaks from the current figures');
  assert.throws(() => al.free(b), /not live/, 'a double free is a bug in the replay, not a figure');
});

test('a block freed on one stream serves only that stream: each stream keeps its own free blocks', () => {
  const al = new TorchAllocatorModel();
  const side = 1;
  const a = al.alloc(100 * MiB, side);
  al.free(a);
  // the default stream finds no cached block of its own: a new segment, though 100 MiB sit free on the side stream
  const b = al.alloc(100 * MiB);
  assert.equal(al.stats().reservedBytes, 200 * MiB);
  al.free(b);
  // the side stream takes its own block back, and so does the default stream: nothing new is reserved
  al.alloc(100 * MiB, side);
  al.alloc(100 * MiB);
  assert.equal(al.stats().reservedBytes, 200 * MiB);
  assert.equal(al.stats().segments, 2);

  const ex = new TorchAllocatorModel({ conf: { ...DEFAULT_ALLOC_CONF, expandableSegments: true } });
  const c = ex.alloc(100 * MiB, side);
  ex.free(c);
  ex.alloc(100 * MiB);
  // expandable segments: one per stream, and the side stream's mapped pages do not grow the default stream's segment
  assert.equal(ex.stats().segments, 2);
  assert.equal(ex.stats().reservedBytes, 200 * MiB);
});

test('a cache grown by concatenation tiles into the blocks a prefill freed; without them each length needs segments of its own', () => {
  // llama-3.2-1b's shape at batch 32: per layer a key and a value block of 32 KiB a token, 512 prompt tokens, then
  // each decode step's torch.cat (DynamicLayer.update, transformers 5.17): the copy one token longer, the old freed.
  // The prefill's transients are freed whole (one segment each); best fit takes the copies into them, and a freed
  // copy merges with the free rest beside it (free_block's try_merge_blocks), so no step needs a new segment. The
  // same copies with no freed room: a copy larger than every free block needs a segment of its own rounded to 2 MiB,
  // and the smaller segments the earlier copies leave are never large enough again.
  const decode = (prefillTransients: number[]): { afterPrefill: number; peakReserved: number; allocated: number } => {
    const al = new TorchAllocatorModel();
    const kv = Array.from({ length: 16 }, () => [al.alloc(512 * perToken), al.alloc(512 * perToken)]);
    for (const h of prefillTransients.map((b) => al.alloc(b))) al.free(h);
    const afterPrefill = al.stats().reservedBytes;
    for (let t = 513; t <= 1024; t++)
      for (const pair of kv)
        for (let i = 0; i < 2; i++) {
          const next = al.alloc(t * perToken);
          al.free(pair[i] as number);
          pair[i] = next;
        }
    return { afterPrefill, peakReserved: al.stats().peakReservedBytes, allocated: al.stats().allocatedBytes };
  };
  const perToken = 32 * 1024;
  const cache = 32 * 1024 * perToken;
  const tiled = decode([256, 256, 256, 256, 64, 64, 64, 64].map((m) => m * MiB));
  assert.ok(tiled.allocated >= cache && tiled.allocated <= cache + 32 * MiB, 'the cache at its longest, with rests of at most 1 MiB a block');
  assert.equal(tiled.peakReserved, tiled.afterPrefill, 'the 512 steps left no segment behind');
  const alone = decode([]);
  assert.ok(alone.peakReserved > 5 * cache, `copies alone: ${alone.peakReserved} bytes reserved for a cache of ${cache}`);
});

test('of two equal free blocks the one in the newer segment is taken: cudaMalloc places later segments lower', () => {
  const al = new TorchAllocatorModel();
  al.free(al.alloc(60 * MiB)); // segment 1: 60 MiB
  const p1 = al.alloc(30 * MiB);
  const p2 = al.alloc(30 * MiB); // segment 1 is full
  const q = al.alloc(30 * MiB); // segment 2: 30 MiB
  al.free(p1);
  al.free(q);
  // two free 30 MiB blocks: segment 1's front and all of segment 2; the lower address (segment 2) is taken
  al.alloc(30 * MiB);
  al.free(p2);
  // segment 1 is free as one 60 MiB run, which holds 50 MiB: no third segment (taking segment 1's block instead
  // would have left it split by a live block, and the 50 MiB request would need a new segment)
  al.alloc(50 * MiB);
  assert.equal(al.stats().peakReservedBytes, 90 * MiB);
  assert.equal(al.stats().segmentAllocs, 2);
});
