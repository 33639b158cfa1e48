/**
 * What pool replay tells of a snapshot, where a user sees it: the segments live when recording began counted as the
 * snapshot's own (not runs of adjacent addresses), the what-if a finding of `gpumem analyze` too, the table fitted
 * to 80 columns with its columns defined under it, and a folder refused in words. On the recordings in
 * ../shared/traces, against counts taken from the snapshots' JSON here.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import type { AnalyzeResult } from '../analyze/result.js';
import { readTrace } from '../formats/allocator-trace.js';
import { renderReplay } from '../render/replay-text.js';
import { runCli } from '../testing/harness.js';
import { recordedFacts, replay } from './replay.js';

const ROOT = ['../../../shared/traces/', '../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync) ?? '../shared/traces/';
const skip = existsSync(ROOT) ? false : `${ROOT} is absent (the shared traces sit beside the checkout)`;
type Snap = { segments: unknown[]; device_traces: Array<Array<{ action: string }>> };
const json = (p: string): Snap => JSON.parse(gunzipSync(readFileSync(ROOT + p)).toString()) as Snap;

test("a recording begun mid-run started with the snapshot's own segments, less those it allocated", { skip }, async () => {
  const file = 'ftcourse/memory_snapshot.pickle.json.gz';
  const s = json(file);
  const count = (a: string): number => s.device_traces[0]!.filter((e) => e.action === a).length;
  const before = s.segments.length - count('segment_alloc') + count('segment_free');
  assert.equal(before, 63, 'the count from the JSON: 215 segments at the end, 152 allocated during the recording');
  const facts = recordedFacts(await readTrace(ROOT + file));
  assert.equal(facts.startedMidRun?.segments, before);
});

test('a snapshot whose replay with growable segments needs 10% less at its peak gets a fragmentation finding', { skip }, async () => {
  const file = `${ROOT}cs336-a2-systems/memory_files/memory_ctx128_fullstep.pickle.json.gz`;
  const cli = await runCli(['analyze', file, '--json']);
  assert.equal(cli.code, 0, cli.err);
  const r = JSON.parse(cli.out) as AnalyzeResult;
  const f = r.findings.find((x) => x.rule === 'fragmentation');
  assert.ok(f, `fragmentation in ${r.findings.map((x) => x.rule).join(', ')}`);
  // the figure the snapshot page's what-if shows: recorded peak reserved less gpumem-growable's
  const report = replay(await readTrace(file));
  const growable = report.configurations.find((c) => c.name === 'gpumem-growable')!;
  const saved = report.trace.peakReservedBytes! - growable.peakReservedBytes;
  assert.ok(saved > 0.09 * report.trace.peakReservedBytes!, 'about a tenth of the recorded peak');
  assert.equal(f.bytes, saved);
  assert.ok(f.evidence.some((e) => /pool replay of the snapshot's allocations: gpumem-growable peaks at/.test(e)));
  assert.match(f.savingHow, /gpumem-growable would not have needed/);
});

test('the replay table fits 80 columns, says which row is which, and defines fragmentation at peak', { skip }, async () => {
  const text = renderReplay(replay(await readTrace(`${ROOT}EoR_NN/snapshot.pickle.json.gz`)), { width: 80 });
  const lines = text.split('\n');
  for (const l of lines) assert.ok(l.length <= 80, `${l.length} columns: ${l}`);
  for (const name of ['pytorch-like', 'gpumem', 'gpumem-growable', 'gpumem-max-split-200MiB'])
    assert.ok(
      lines.some((l) => l.startsWith(`${name} `) && /MiB|GiB/.test(l)),
      `a row named ${name}`,
    );
  assert.match(text, /frag\.: fragmentation at peak, 1 - \(largest free block \/ free bytes\)/);
});

test('pool replay of a folder says it needs the file itself, exit 2', async () => {
  const cli = await runCli(['pool', 'replay', new URL('.', import.meta.url).pathname]);
  assert.equal(cli.code, 2);
  assert.match(cli.err, /a folder, not a trace file: pool replay reads one allocation trace/);
  assert.doesNotMatch(cli.err, /EISDIR/);
  assert.equal(cli.out, '');
});
