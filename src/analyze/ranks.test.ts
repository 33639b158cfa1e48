/** One trace per rank: each analysed on its own, on worker threads, and the ranks compared for stragglers. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../cli/program.js';
import { writeRankTraces } from '../testing/rank-traces.js';
import { sharedTest, sharedTrace } from '../testing/shared-traces.js';
import { analyzeFiles } from './analyze.js';
import { analyzeRanks, findStragglers, type RankResult } from './ranks.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-ranks-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

test('eight ranks: each analysed as on its own, the slow one found with its evidence', async () => {
  const files = writeRankTraces(dir, 8, { slow: [5], slowBy: 10 });
  const r = await analyzeRanks(files, { format: 'kineto', workers: 2 });
  assert.equal(r.workers, 2);
  assert.deepEqual(
    r.ranks.map((x) => x.rank),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
  // a rank's result is the one analysing its file alone gives
  assert.deepEqual(r.ranks[3]!.result, await analyzeFiles([files[3]!]));
  const slow = r.stragglers.filter((s) => s.metric === 'syncBlockedNs');
  assert.deepEqual(
    slow.map((s) => s.rank),
    [5],
  );
  assert.ok(slow[0]!.valueNs > 5 * slow[0]!.medianNs);
  assert.match(slow[0]!.evidence, /rank 5: host time blocked in synchronisation .* over 8 ranks/);
  assert.ok(r.rules.some((x) => x.rule === 'pageable-copy' && x.ranks.length === 8));
});

test('stragglers need three ranks and a real difference, not noise', () => {
  const rank = (n: number, sync: number): RankResult =>
    ({
      rank: n,
      file: '',
      findings: [],
      result: undefined as never,
      metrics: { spanNs: 1e9, kernelBusyNs: 5e8, gpuIdleNs: 5e8, copyNs: 1e7, copyBytes: 0, syncBlockedNs: sync, syncs: 10, savingNs: 0 },
    }) as RankResult;
  assert.equal(findStragglers([rank(0, 1e6), rank(1, 9e8)]).stragglers.length, 0, 'two ranks');
  assert.equal(findStragglers([0, 1, 2, 3].map((i) => rank(i, 100e6 + i * 1e6))).stragglers.length, 0, '1% apart');
  const s = findStragglers([0, 1, 2, 3, 4].map((i) => rank(i, i === 2 ? 400e6 : 100e6 + i * 1e6))).stragglers;
  assert.deepEqual(
    s.map((x) => [x.rank, x.metric]),
    [[2, 'syncBlockedNs']],
  );
});

test('a rank file that cannot be read is listed, the others still analysed', async () => {
  const sub = mkdtempSync(join(dir, 'bad-'));
  const files = writeRankTraces(sub, 3);
  writeFileSync(files[1]!, '{"traceEvents": [');
  const r = await analyzeRanks(files, { format: 'kineto', workers: 2 });
  assert.equal(r.ranks.length, 2);
  assert.equal(r.refused.length, 1);
  assert.match(r.refused[0]!.reason, /truncated|ends in the middle/);
});

test('gpumem analyze DIR of rank traces prints each rank and the stragglers', async () => {
  const sub = mkdtempSync(join(dir, 'cli-'));
  writeRankTraces(sub, 4, { slow: [2], slowBy: 20 });
  let out = '';
  const code = await main(['analyze', sub, '--workers', '2'], { out: (s) => (out += s), err: () => {} });
  assert.equal(code, 0);
  assert.match(out, /ranks: 4 traces \(kineto\), analysed on 2 worker threads/);
  assert.match(out, /stragglers \(\d+\)/);
  assert.match(out, /rank 2: host time blocked in synchronisation/);
  let json = '';
  assert.equal(await main(['analyze', sub, '--json'], { out: (s) => (json += s), err: () => {} }), 0);
  assert.equal(JSON.parse(json).schema, 'gpumem.analyze-ranks/1');
  let err = '';
  assert.equal(await main(['analyze', sub, '--html', join(dir, 'x.html')], { out: () => {}, err: (s) => (err += s) }), 2);
  assert.match(err, /timeline of one trace/);
});

const SHARED = sharedTrace('HolisticTraceAnalysis/tests/data/trace_filter/');
sharedTest('the two sampled ranks of a 128-rank job are read as ranks 0 and 1', {}, async () => {
  const r = await analyzeRanks([`${SHARED}sampled_rank-1.json.gz`, `${SHARED}sampled_rank-0.json.gz`], { format: 'kineto' });
  assert.deepEqual(
    r.ranks.map((x) => x.rank),
    [0, 1],
  );
  assert.equal(r.stragglers.length, 0);
  assert.match(r.notes.join(' '), /too few to tell a straggler/);
});
