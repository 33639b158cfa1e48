/**
 * PYTORCH_CUDA_ALLOC_CONF read as PyTorch reads it, and the caching allocator model under each setting, against the
 * rules of CUDACachingAllocator.cpp (should_split, get_free_block, round_size, try_allocate_expandable_block,
 * garbage_collect_cached_blocks).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../errors.js';
import { DEFAULT_ALLOC_CONF, formatAllocConf, parseAllocConf, roundRequest } from './alloc-conf.js';
import { TorchAllocatorModel } from './torch-caching.js';

const MiB = 1024 * 1024;

test('the settings are read as PyTorch reads them, and what it refuses is refused with a typed error', () => {
  assert.deepEqual(parseAllocConf(''), DEFAULT_ALLOC_CONF);
  const c = parseAllocConf('expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6');
  assert.equal(c.expandableSegments, true);
  assert.equal(c.maxSplitBytes, 128 * MiB);
  assert.equal(c.garbageCollectionThreshold, 0.6);
  assert.equal(formatAllocConf(c), 'expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6');
  const d = parseAllocConf('roundup_power2_divisions:[256:1,512:2,>:4]');
  assert.deepEqual(d.roundupPower2Divisions.slice(0, 11), [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4], 'the first key fills the intervals below it, > those above');
  assert.equal(parseAllocConf('roundup_power2_divisions:4').roundupPower2Divisions[15], 4);
  assert.equal(parseAllocConf('release_lock_on_cudamalloc:True,backend:native').expandableSegments, false, 'options that change no figure are accepted');
  for (const bad of [
    'expandable_segments:true',
    'max_split_size_mb:10',
    'garbage_collection_threshold:1.5',
    'roundup_power2_divisions:3',
    'no_such:1',
    'backend:cudaMallocAsync',
    'expandable_segments',
  ])
    assert.throws(
      () => parseAllocConf(bad),
      (e) => isGpuError(e, ErrorCode.INVALID_ARGUMENT) && /PYTORCH_CUDA_ALLOC_CONF/.test(e.message),
      bad,
    );
});

test('roundup_power2_divisions rounds a request to the next division of its power-of-two interval', () => {
  const four = parseAllocConf('roundup_power2_divisions:4');
  assert.equal(roundRequest(1.2 * MiB, four), 1.25 * MiB, 'between 1 and 2 MiB, in steps of 256 KiB');
  assert.equal(roundRequest(2 * MiB, four), 2 * MiB, 'a power of two stays');
  assert.equal(roundRequest(1200, four), 1536, 'at most 512 x divisions: the 512-byte rounding');
  assert.equal(roundRequest(1.2 * MiB), 1.2 * MiB - ((1.2 * MiB) % 512) + 512, 'by default: 512 bytes');
});

test('expandable segments: one segment per stream grown in 20 MiB pages, never unmapped on free, unmapped by empty_cache', () => {
  const al = new TorchAllocatorModel({ conf: parseAllocConf('expandable_segments:True') });
  const a = al.alloc(30 * MiB);
  const b = al.alloc(12 * MiB);
  assert.equal(al.stats().reservedBytes, 60 * MiB, '42 MiB of blocks on three 20 MiB pages');
  assert.equal(al.stats().segments, 1, 'both in one segment');
  al.free(a);
  assert.equal(al.stats().reservedBytes, 60 * MiB, 'freeing unmaps nothing');
  al.alloc(29 * MiB);
  assert.equal(al.stats().reservedBytes, 60 * MiB, 'the hole below b serves a request it holds, split at 512 bytes');
  const c = al.alloc(40 * MiB);
  assert.equal(al.stats().reservedBytes, 100 * MiB, 'the end grows: 82 MiB of blocks on five pages');
  al.free(b);
  al.emptyCache();
  assert.equal(al.stats().reservedBytes, 100 * MiB, 'empty_cache() unmaps only pages nothing lives on: every page still has a block');
  al.free(c);
  al.emptyCache();
  assert.equal(al.stats().reservedBytes, 40 * MiB, 'the last block freed: its pages and the emptied one below go back');
  const fixed = new TorchAllocatorModel();
  const f = fixed.alloc(30 * MiB);
  fixed.alloc(12 * MiB);
  fixed.free(f);
  fixed.alloc(40 * MiB);
  assert.equal(fixed.stats().reservedBytes, 82 * MiB, 'without: the freed 30 MiB segment cannot hold 40 MiB, a third segment comes');
  assert.ok(al.stats().segments === 1 && fixed.stats().segments === 3);
});

test('max_split_size_mb: large blocks are not split, not handed to smaller requests, and released first when memory runs out', () => {
  const al = new TorchAllocatorModel({ conf: parseAllocConf('max_split_size_mb:100') });
  const big = al.alloc(200 * MiB);
  al.free(big);
  al.alloc(50 * MiB);
  assert.equal(al.stats().reservedBytes, 250 * MiB, 'the cached 200 MiB block does not serve a 50 MiB request');
  const h = al.alloc(190 * MiB);
  assert.equal(al.stats().allocatedBytes, 250 * MiB, 'a 190 MiB request takes the 200 MiB block whole (less than 20 MiB larger), unsplit');
  al.free(h);
  al.alloc(150 * MiB);
  assert.equal(al.stats().reservedBytes, 400 * MiB, 'but not for a request 50 MiB smaller');

  const tight = new TorchAllocatorModel({ capacityBytes: 300 * MiB, conf: parseAllocConf('max_split_size_mb:100') });
  tight.free(tight.alloc(200 * MiB));
  tight.alloc(150 * MiB);
  assert.equal(tight.outOfMemory, false, 'the oversize cached block was released to make room');
  assert.equal(tight.stats().reservedBytes, 150 * MiB);
});

test('garbage_collection_threshold acts only under a memory fraction, freeing old whole segments before cudaMalloc', () => {
  const conf = parseAllocConf('garbage_collection_threshold:0.5');
  const run = (al: TorchAllocatorModel): number => {
    for (const mb of [80, 90, 100]) al.free(al.alloc(mb * MiB));
    al.alloc(120 * MiB);
    return al.stats().reservedBytes;
  };
  assert.equal(run(new TorchAllocatorModel({ conf })), 390 * MiB, 'without a fraction nothing is collected');
  const collected = run(new TorchAllocatorModel({ conf, fractionBytes: 400 * MiB }));
  assert.equal(
    collected,
    310 * MiB,
    'with a fraction of 400 MiB, the oldest free segment (80 MiB) went back before the new one: reserved fell under 0.5 x 400 MiB',
  );
  const capped = new TorchAllocatorModel({ fractionBytes: 100 * MiB });
  capped.alloc(120 * MiB);
  assert.equal(capped.outOfMemory, true, 'the fraction caps reserved memory');
});
