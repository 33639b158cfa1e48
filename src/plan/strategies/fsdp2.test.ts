/**
 * FSDP2 (fully_shard) on the caching allocator: its gradient shards come from the reduce-scatter stream, whose freed
 * blocks the next forward pass cannot reuse, and a shard group of one GPU gathers nothing (the shards are copied).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ONE_GPU, trainOptions } from '../../testing/plan-options.js';
import { catalogueModel } from '../catalogue.js';
import { estimate } from '../estimate.js';
import { torchtitanCommit } from '../frameworks/torchtitan-commits.js';
import { DEFAULT_INPUTS, type PlanInputs, planOptionsFrom } from '../inputs.js';
import type { ModelConfig } from '../model-config.js';
import type { TrainOptions } from '../options.js';
import type { Tag } from '../program/mem.js';
import { trainProgram } from '../program/train-step.js';
import { Walk } from '../program/walk.js';
import { replayRun, setupOf } from '../train.js';

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

/** The walk's peak of each moment and the most each line held, for `o`. */
function walked(model: ModelConfig, o: TrainOptions) {
  const s = setupOf(model, o);
  const w = new Walk();
  trainProgram(w, s, { steps: 1, steadyState: true, fp32Cast: false });
  const line = (peak: Map<Tag, number> | undefined, prefix: string): number =>
    [...(peak ?? new Map<Tag, number>())].filter(([t]) => t.name.startsWith(prefix)).reduce((a, [, b]) => a + b, 0);
  return { s, peaks: w.peaks(), most: w.tagMaxima(), line };
}

const titan = (torchtitan: string | undefined) =>
  trainOptions({
    batch: 1,
    seq: 2048,
    parallel: { ...ONE_GPU, gpus: 8, zero: 3 },
    fragmentation: undefined,
    fsdpUnits: torchtitan === undefined ? undefined : torchtitanCommit(torchtitan).fsdpUnits,
  });
const m8 = catalogueModel('llama-3.1-8b');
const ROOT = 'parameters: root unit gathered';
const EMBED = 'parameters: embedding unit gathered';
const HEAD = 'parameters: output unit gathered';
const BLOCK = 'parameters: a block gathered';

test("torchtitan's commit rows: the root unit holds the ends before 83e6941 (2025-07-28), the ends are units apart from it on", () => {
  assert.equal(torchtitanCommit('2025-07-27').fsdpUnits, 'root-ends');
  assert.equal(torchtitanCommit('0.1.0').fsdpUnits, 'root-ends');
  assert.equal(torchtitanCommit('2025-07-28').fsdpUnits, 'ends-apart');
  assert.equal(torchtitanCommit('v0.2.0').fsdpUnits, 'ends-apart');
  assert.throws(() => torchtitanCommit('2023-05-01'), /follows torchtitan from/);
  assert.throws(() => torchtitanCommit('main'), /commit's date/);
  const given = (i: Partial<PlanInputs>) => planOptionsFrom({ ...DEFAULT_INPUTS, gpus: 8, ...i, given: Object.keys(i) }) as TrainOptions;
  assert.equal(given({ fsdp: '2', torchtitan: '2025-08-14' }).fsdpUnits, 'ends-apart');
  assert.equal(given({ fsdp: true, torchtitan: '2025-06-11' }).fsdpUnits, 'root-ends');
  assert.throws(() => given({ fsdp: '1', torchtitan: '2025-08-14' }), /--torchtitan/);
  assert.throws(() => given({ torchtitan: '2025-08-14' }), /--torchtitan/);
});

test('FSDP2 ends apart (torchtitan from 83e6941): the root holds nothing, the embedding unit is gathered one pass at a time, the head unit once', () => {
  const { s, peaks, most, line } = walked(m8, titan('2025-08-14'));
  assert.equal(s.table.ends.length, 3);
  assert.deepEqual([s.ends.embedding?.tensors.map((t) => t.key), s.ends.head?.tensors.map((t) => t.key)], [['embed'], ['lm_head', 'norm']]);
  for (const p of peaks.values()) assert.equal(line(p.byTag, ROOT), 0, 'no root unit gathered at any peak');
  assert.equal(line(most, ROOT), 0, 'the root unit gathers no parameters at any moment');
  // bf16 gathers (MixedPrecisionPolicy's param_dtype over 8 GPUs): the unit's whole tensors, never two copies at once
  const embed = m8.vocab * m8.hidden * 2;
  const head = (m8.vocab * m8.hidden + m8.hidden) * 2;
  assert.equal(line(most, EMBED), embed);
  assert.equal(line(most, HEAD), head);
});

test('FSDP2 ends apart: the head unit, not resharded after forward, is held at the backward peak; the embedding unit and the last block are not', () => {
  const before = walked(m8, titan('2025-06-11'));
  const after = walked(m8, titan('2025-08-14'));
  const b = before.peaks.get('backward');
  const a = after.peaks.get('backward');
  assert.ok(a && b);
  const embed = m8.vocab * m8.hidden * 2;
  const head = (m8.vocab * m8.hidden + m8.hidden) * 2;
  const block = after.s.table.dense.tensors.reduce((n, t) => n + t.numel, 0) * 2;
  // the backward pass peaks where the loss's gradients are made: under root-ends the root (embedding, norm, output)
  // and the last block are gathered then; under ends-apart only the head unit is
  assert.equal(before.line(b.byTag, ROOT), embed + head);
  assert.equal(before.line(b.byTag, BLOCK), block);
  assert.equal(after.line(a.byTag, HEAD), head, "the head unit's gathered parameters at the backward peak");
  assert.equal(after.line(a.byTag, EMBED), 0);
  assert.equal(after.line(a.byTag, BLOCK), 0, 'the last block resharded after its forward pass');
  assert.equal(b.bytes - a.bytes, embed + block, 'the same moment, less the embedding unit and the last block');
  // in the forward pass the head unit is gathered for the final norm and the loss; the embedding unit is already resharded
  const f = after.peaks.get('forward');
  assert.equal(after.line(f?.byTag, HEAD), head);
  assert.equal(after.line(f?.byTag, EMBED), 0);
});

test("FSDP2 ends apart: the embedding's and the head's gradients are reduce-scattered to this GPU's shards, as the root's were", () => {
  const before = walked(m8, titan('2025-06-11'));
  const after = walked(m8, titan('2025-08-14'));
  const step = (w: typeof after) => w.line(w.peaks.get('optimizer-step')?.byTag, 'gradients');
  // fp32 shards of every parameter (MixedPrecisionPolicy's reduce_dtype) over the 8 GPUs, nothing left unsharded
  const total = after.s.c.total;
  assert.equal(step(after), (total * 4) / 8);
  assert.equal(step(after), step(before));
});
