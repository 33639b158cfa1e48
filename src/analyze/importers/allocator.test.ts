/** `gpumem analyze` on memory snapshots: the pickle read directly, findings per GPU, the recorded allocator settings respected, no invented span. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../testing/harness.js';
import { Raw, writePickle, type PickleInput } from '../../testing/pickle-writer.js';
import { EXPECTED, MiB, snapshotFixture, writeSnapshotFixture } from '../../testing/snapshot-fixture.js';
import { analyzeFiles } from '../analyze.js';

const withDir = async (fn: (dir: string) => Promise<void>): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-analyze-snap-'));
  try {
    await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

test('fragmentation is judged per GPU: the figure is the GPU that strands memory, never a sum over GPUs', async () => {
  await withDir(async (dir) => {
    const { pickle, json } = writeSnapshotFixture(dir);
    const r = await analyzeFiles([pickle]);
    assert.deepEqual(await analyzeFiles([json]), { ...r, summary: { ...r.summary, files: [json] } }, 'the pickle and its JSON analyse alike');
    const f = r.findings.find((x) => x.rule === 'fragmentation');
    assert.ok(f, 'GPU 1 strands 924 MiB of its 1 GiB');
    assert.equal(f.bytes, EXPECTED.strandedOnGpu1, "GPU 1's own figure; GPU 2's 1 MiB is not added to it");
    assert.match(f.title, /on GPU 1$/);
    assert.ok(f.evidence.some((e) => e.startsWith('GPU 1: ')) && f.evidence.some((e) => e.startsWith('GPU 0: ')), 'evidence names each GPU');
    // expandable segments were on: do not recommend turning them on
    assert.doesNotMatch(f.change, /Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True/);
    assert.match(f.change, /already on/);
    // the fixture's clock ticks 250 µs per entry, 17 entries in all (the snapshot marker among them): from the first
    // event to the last are 16 ticks
    assert.equal(r.summary.spanNs, 16 * 250 * 1000);
  });
});

test('with the default settings the advice is to turn expandable segments on, and says max_split_size_mb when it is set', async () => {
  await withDir(async (dir) => {
    const snap = snapshotFixture();
    const settings = snap.allocator_settings as Record<string, PickleInput>;
    settings.expandable_segments = false;
    settings.PYTORCH_CUDA_ALLOC_CONF = 'max_split_size_mb:128';
    settings.max_split_size = 128 * MiB;
    for (const s of snap.segments as Array<Record<string, PickleInput>>) s.is_expandable = false;
    const file = join(dir, 'default.pickle');
    writeFileSync(file, writePickle(snap));
    const f = (await analyzeFiles([file])).findings.find((x) => x.rule === 'fragmentation');
    assert.ok(f);
    assert.match(f.change, /Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True/);
    assert.match(f.change, /max_split_size_mb is already 128/);
  });
});

test('a snapshot without time_us gets no span: its events keep their order, and the page and text say the span is not recorded', async () => {
  await withDir(async (dir) => {
    const { pickle } = writeSnapshotFixture(dir, { timed: false });
    const r = await analyzeFiles([pickle]);
    assert.equal(r.summary.spanNs, 0, 'not the event count read as nanoseconds');
    assert.ok(r.summary.notes.some((n) => /no time_us/.test(n)));
    const out = await runCli(['analyze', pickle]);
    assert.equal(out.code, 0, out.err);
    assert.match(out.out, /span: not recorded/);
    assert.doesNotMatch(out.out, /span: \d/);
  });
});

test('the CLI reads a snapshot pickle, and refuses one that would run code with exit 2 and nothing half-printed', async () => {
  await withDir(async (dir) => {
    const { pickle } = writeSnapshotFixture(dir);
    const ok = await runCli(['analyze', pickle, '--json']);
    assert.equal(ok.code, 0, ok.err);
    const j = JSON.parse(ok.out) as { summary: { formats: string[]; allocations: { frameworkAllocEvents: number } } };
    assert.deepEqual(j.summary.formats, ['memory-snapshot']);
    assert.equal(j.summary.allocations.frameworkAllocEvents, EXPECTED.allocs[0] + EXPECTED.allocs[1] + EXPECTED.allocs[2]);
    const evil = join(dir, 'evil.pickle');
    writeFileSync(evil, writePickle({ segments: [], device_traces: new Raw(Buffer.from('cposix\nsystem\n', 'latin1')) }));
    const bad = await runCli(['analyze', evil]);
    assert.equal(bad.code, 2);
    assert.equal(bad.out, '');
    assert.match(bad.err, /posix\.system/);
  });
});
