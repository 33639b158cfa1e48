/**
 * The per-release decisions as pure functions: which batch-call form and attributes, which fallback, which flag,
 * which management library, XNACK; and how a batch is split into calls.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { NativeCopyBatch } from '../backend.js';
import { planChunks } from '../native/batch-call.js';
import {
  batchHeaderHasFailIndex,
  HIP_BATCH_MAX_COPIES,
  HIP_ERROR_NOT_SUPPORTED,
  hipBatchPolicy,
  hipVersion,
  mallocAsyncNeedsStream,
  managementOrder,
  memoryPools,
  uncachedDeviceMemory,
  virtualMemory,
} from './releases.js';
import { xnackDecision } from './xnack.js';

test('hipMemcpyBatchAsync: absent before 7.1, no attributes on 7.1 to 7.12, per-run attributes from 7.13, 8192 copies a call', () => {
  assert.equal(hipBatchPolicy(hipVersion(7, 0, 25314)), undefined, 'ROCm 7.0 has no batch call');
  for (const v of [hipVersion(7, 1), hipVersion(7, 2, 53211), hipVersion(7, 12)]) {
    assert.deepEqual(hipBatchPolicy(v), { failIndex: true, attributes: 'none', maxCopies: 8192, refused: HIP_ERROR_NOT_SUPPORTED }, String(v));
  }
  assert.equal(hipBatchPolicy(hipVersion(7, 13))?.attributes, 'per-run');
  assert.equal(HIP_ERROR_NOT_SUPPORTED, 801, 'hipErrorNotSupported in hip_runtime_api.h');
  // A header that drops failIdx (as CUDA 13 did) is bound with the 8-argument form.
  assert.equal(hipBatchPolicy(hipVersion(7, 13), false)?.failIndex, false);
});

test('the batch prototype is read from the install header where there is one', () => {
  const root = mkdtempSync(join(tmpdir(), 'gpumem-hdr-'));
  try {
    const write = (text: string): void => {
      mkdirSync(join(root, 'include/hip'), { recursive: true });
      writeFileSync(join(root, 'include/hip/hip_runtime_api.h'), text);
    };
    assert.equal(batchHeaderHasFailIndex(root), undefined, 'no header: undefined');
    write(
      'hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes, size_t count,\n hipMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,\n size_t* failIdx, hipStream_t stream __dparm(0));',
    );
    assert.equal(batchHeaderHasFailIndex(root), true);
    write(
      'hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes, size_t count, hipMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, hipStream_t stream);',
    );
    assert.equal(batchHeaderHasFailIndex(root), false);
    write('hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, hipMemcpyKind k, hipStream_t s);');
    assert.equal(batchHeaderHasFailIndex(root), undefined, 'a header without the declaration says nothing');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('releases: 5.2 needs a stream for hipMallocAsync, uncached memory from 5.6, VMM from 6.0 where devices say, AMD SMI first from 6.1', () => {
  assert.equal(mallocAsyncNeedsStream(hipVersion(5, 2, 21153)), true);
  assert.equal(mallocAsyncNeedsStream(hipVersion(5, 3)), false);
  for (const [minor, ok] of [
    [3, false],
    [5, false],
    [6, true],
  ] as const)
    assert.equal(uncachedDeviceMemory(hipVersion(5, minor)), ok, `5.${minor}`);
  assert.equal(virtualMemory(hipVersion(6, 1), true, [1, 1]), true);
  assert.equal(virtualMemory(hipVersion(6, 1), true, [1, 0]), false, 'every device must say so');
  assert.equal(virtualMemory(hipVersion(6, 1), false, [1]), false, 'the symbols must be there');
  assert.equal(virtualMemory(hipVersion(5, 7), true, [1]), false, 'the 5.x allocation-prop layout is not bound');
  assert.equal(virtualMemory(hipVersion(6, 1), true, []), false, 'no device, no claim');
  assert.equal(memoryPools(true, [1, undefined]), false, 'an attribute the runtime refuses is not a yes');
  assert.deepEqual(managementOrder(hipVersion(6, 0)), ['rocm-smi']);
  assert.deepEqual(managementOrder(hipVersion(6, 1)), ['amd-smi', 'rocm-smi']);
});

test('XNACK: the runtime pageable-access answer first, then the target suffix; a target without one never retries', () => {
  assert.deepEqual(xnackDecision('gfx90a:sramecc+:xnack+', undefined, undefined), { arch: true, enabled: true, source: 'arch' });
  assert.deepEqual(xnackDecision('gfx942:sramecc+:xnack-', undefined, '1'), { arch: false, env: '1', enabled: false, source: 'arch' });
  // The runtime's own answer wins over the name (it is what SVM_ACCESSIBLE_BY_DEFAULT says for this process).
  assert.deepEqual(xnackDecision('gfx90a:xnack+', false, '0'), { arch: true, env: '0', enabled: false, source: 'runtime' });
  assert.deepEqual(xnackDecision('gfx1100', undefined, undefined), { enabled: false, source: 'arch' });
  assert.deepEqual(xnackDecision(undefined, undefined, undefined), {}, 'nothing known: nothing said');
});

/** A batch of `n` copies in runs that change every `every` copies. */
function batchOf(n: number, every: number): NativeCopyBatch {
  const a = new Uint32Array(2 * n);
  const runs = [];
  for (let i = 0; i < n; i += every) runs.push({ first: i, src: { type: 'host' as const }, dst: { type: 'device' as const, device: i % 3 } });
  return { count: n, dsts: a, srcs: a, sizes: a, runs };
}

test('a batch is split into calls of at most 8192 copies, each with the runs it covers, indices from its own first copy', () => {
  const chunks = planChunks(batchOf(20_000, 5000), true, HIP_BATCH_MAX_COPIES);
  assert.deepEqual(
    chunks.map((c) => [c.first, c.count]),
    [
      [0, 8192],
      [8192, 8192],
      [16384, 3616],
    ],
  );
  assert.equal(
    chunks.reduce((s, c) => s + c.count, 0),
    20_000,
    'every copy in exactly one call',
  );
  // The second call covers runs starting at 5000 (from its copy 0), 10000 and 15000.
  const second = chunks[1]!;
  assert.equal(second.numAttrs, 3);
  assert.deepEqual([second.idx![0], second.idx![2], second.idx![4]], [0, 10000 - 8192, 15000 - 8192]);
  assert.equal(second.dsts.length, 2 * 8192, 'a view of the batch, not a copy');
  const none = planChunks(batchOf(10, 5), false, HIP_BATCH_MAX_COPIES);
  assert.equal(none.length, 1);
  assert.equal(none[0]!.numAttrs, 0);
  assert.equal(none[0]!.attrs, null);
});
