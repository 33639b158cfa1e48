/**
 * --run-lengths: the whole run's micro-batches replayed through one caching allocator (run-lengths.ts, train.ts
 * replayRun), the peak max_memory_reserved() reads after trainer.train().
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catalogueModel } from './catalogue.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import { estimateTrain, replayRun } from './train.js';
import { microBatches, parseRunLengths, sampleLengths } from './run-lengths.js';
import type { TrainOptions } from './options.js';

const train = (i: Partial<PlanInputs>): TrainOptions =>
  planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'train', precision: 'bf16-pure', recompute: 'full', attention: 'flash', lora: 8, ...i }) as TrainOptions;

test('samples over --seq are dropped (over=drop) or cut to it, and groups of --batch are padded to their longest', () => {
  const drop = parseRunLengths('300,900,100,1200,50;over=drop');
  assert.deepEqual(microBatches(drop, 1000, 2), [
    { batch: 2, seq: 900 },
    { batch: 2, seq: 100 },
  ]);
  const cut = parseRunLengths('300,900,100,1200,50');
  assert.deepEqual(microBatches(cut, 1000, 2), [
    { batch: 2, seq: 900 },
    { batch: 2, seq: 1000 },
    { batch: 1, seq: 50 },
  ]);
});

test('a lognormal spec draws n samples inside [min, max] whose mean is near the one asked, the same on every call', () => {
  const spec = parseRunLengths('lognormal:mean=3234.4,sd=2547.5,min=91,max=19548,n=4000');
  const xs = sampleLengths(spec);
  assert.equal(xs.length, 4000);
  assert.ok(
    xs.every((x) => x >= 91 && x <= 19548),
    'inside the cut',
  );
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  assert.ok(Math.abs(mean - 3234.4) < 0.1 * 3234.4, `mean ${mean}`);
  assert.deepEqual(sampleLengths(spec), xs, 'a fixed seed');
  assert.notDeepEqual(sampleLengths(parseRunLengths('lognormal:mean=3234.4,sd=2547.5,min=91,max=19548,n=4000,seed=7')), xs, 'another seed');
});

test('a spec with an unknown key or no mean is refused, naming the option', () => {
  assert.throws(() => parseRunLengths('lognormal:mean=100,sd=10,n=5,shape=2'), /--run-lengths: unknown key "shape"/);
  assert.throws(() => parseRunLengths('lognormal:sd=10,n=5'), /--run-lengths: lognormal needs mean/);
  assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, runLengths: 'lognormal' }), /--run-lengths/);
  assert.throws(() => planOptionsFrom({ ...DEFAULT_INPUTS, runLengths: '512,1024', fit: 'seq' }), /cannot be searched with --fit seq/);
});

test('a run of one length reserves what the one-step replay does; lengths that vary leave segments no later step reuses', () => {
  const m = catalogueModel('llama-3.2-1b');
  const one = replayRun(m, train({ seq: 2048, gradAccum: 2 }));
  const same = replayRun(m, train({ seq: 2048, gradAccum: 2, runLengths: Array(6).fill(2048).join(',') }));
  assert.ok(one && same);
  assert.equal(same.peakReservedBytes, one.peakReservedBytes, 'the same step six times: the same cache');
  // short samples first, then longer ones: each new length needs blocks the cached segments cannot give whole
  const rising = replayRun(m, train({ seq: 2048, gradAccum: 2, runLengths: '256,512,768,1024,1280,1536,1792,2048' }));
  assert.ok(rising);
  assert.equal(rising.peakAllocatedBytes, one.peakAllocatedBytes, 'the longest micro-batch holds what the one step at --seq does');
  assert.ok(rising.peakReservedBytes > one.peakReservedBytes, `run ${rising.peakReservedBytes} against one step ${one.peakReservedBytes}`);
});

test('the estimate reports the whole run in its reserved figure and says so in the cached line', () => {
  const m = catalogueModel('llama-3.2-1b');
  const step = estimateTrain(m, train({ seq: 2048 }));
  const run = estimateTrain(m, train({ seq: 2048, runLengths: '256,512,768,1024,1280,1536,1792,2048' }));
  assert.equal(run.allocatedPeakBytes, step.allocatedPeakBytes);
  assert.ok(run.reservedPeakBytes > step.reservedPeakBytes);
  const line = run.lines.find((l) => l.name.startsWith('caching allocator'));
  assert.match(line?.note ?? '', /whole run's 8 micro-batches/);
});

test('a run whose samples stay under --seq plans its longest micro-batch: lines, allocated and reserved, with either allocator setting', () => {
  const m = catalogueModel('llama-3.2-1b');
  for (const allocConf of [undefined, 'expandable_segments:True']) {
    const at = estimateTrain(m, train({ seq: 1500, allocConf }));
    const run = estimateTrain(m, train({ seq: 4096, allocConf, runLengths: '1500,1500,1500' }));
    // the run's peak is over every step, the one-step replay's over its last (their first steps differ by blocks of KiB)
    const near = (a: number | undefined, b: number | undefined): boolean => Math.abs((a ?? 0) / (b ?? 1) - 1) < 1e-4;
    assert.ok(near(run.allocatedPeakBytes, at.allocatedPeakBytes), `${allocConf}: allocated ${run.allocatedPeakBytes} against ${at.allocatedPeakBytes}`);
    assert.ok(near(run.reservedPeakBytes, at.reservedPeakBytes), `${allocConf}: reserved ${run.reservedPeakBytes} against ${at.reservedPeakBytes}`);
    assert.equal(run.activationsBytes, at.activationsBytes, `${allocConf}: the lines are the 1500-token micro-batch's`);
  }
});
