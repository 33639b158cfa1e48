/**
 * The program against what PyTorch did on one H200 (2026-12-01): the 40 fit runs' reserved peaks through the
 * allocator replay, and the tensors torch.compile's partitioner handed to the backward pass (the census) against the
 * compiled save policy's count.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { measuredOptions, type MeasuredRow } from '../../testing/plan-measured.js';
import { readConfigFile } from '../config-file.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from '../inputs.js';
import { normaliseConfig } from '../model-config.js';
import type { TrainOptions } from '../options.js';
import { replayRun, setupOf } from '../train.js';
import { compiledKept } from './compiled.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const json = <T>(path: string): T => JSON.parse(readFileSync(`${ROOT}${path}`, 'utf8')) as T;

test('the 40 fit runs: the replay of each lands within 10% of max_memory_reserved, the checkpointed runs among them', () => {
  const doc = json<{ rows: Array<MeasuredRow & { peakReservedBytes: number; recompute: string }> }>('fixtures/plan/measured-peaks-lora-fit.json');
  assert.equal(doc.rows.length, 40);
  let checkpointed = 0;
  for (const r of doc.rows) {
    const m = normaliseConfig(r.config, 'fixture', r.model);
    // the recording script built each model in fp32 and cast it to bf16 without emptying the cache
    const replay = replayRun(m, measuredOptions(r) as TrainOptions, true);
    assert.ok(replay, `${r.model}: replayed`);
    const err = replay.peakReservedBytes / r.peakReservedBytes - 1;
    assert.ok(Math.abs(err) <= 0.1, `${r.model} ${r.recompute} ${String(r.batch)}x${String(r.seq)}: ${(err * 100).toFixed(1)}%`);
    assert.ok(replay.peakReservedBytes >= replay.peakAllocatedBytes, 'reserved holds what is allocated');
    if (r.recompute === 'full') checkpointed++;
  }
  assert.equal(checkpointed, 12, 'the checkpointed runs, where reserved exceeds allocated by up to 59%, are among them');
});

interface CensusRun {
  id: string;
  graphs: Array<{ saved: Array<{ op: string; shape: string; bytes: number }> }>;
}

test("a compiled block keeps what inductor's partitioner saved on an H200, for every family recorded (fit and test)", () => {
  // the census (benchmarks/pytorch/record_compile_peaks.py --census) lists every tensor the compiled forward hands to
  // the backward; the blocks' share is every token-major tensor (not the logits, the causal mask, weight casts, or the
  // per-token loss statistics)
  const census = json<{ runs: CensusRun[] }>('docs/evidence/2026-12-01-1x-h200/compile/census.json');
  const fixture = json<{ rows: Array<{ id: string; model: string; role: string; flags: string[]; details: { lora: { rank: number } | null } }> }>(
    'fixtures/plan/measured-peaks-h200-compile.json',
  );
  assert.ok(census.runs.length >= 4, 'the census holds the recorded runs');
  for (const run of census.runs) {
    const row = fixture.rows.find((r) => r.id === run.id);
    assert.ok(row, `${run.id} is a fixture row`);
    const m = readConfigFile(`${ROOT}fixtures/plan/configs/${row.model.split('/')[1]}/config.json`);
    const flag = (f: string): string | undefined => row.flags[row.flags.indexOf(f) + 1];
    const tokens = Number(flag('--batch')) * Number(flag('--seq'));
    const rank = row.details.lora?.rank;
    const inputs: Partial<PlanInputs> = {
      compile: true,
      lora: rank,
      baseWeights: rank ? 'bf16' : undefined,
      loraTargets: row.flags.includes('--lora-targets') ? flag('--lora-targets') : undefined,
    };
    const o = planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'train', precision: 'amp-bf16', batch: 4, seq: 512, ...inputs }) as TrainOptions;
    let blocks = 0;
    for (const g of run.graphs)
      for (const s of g.saved) {
        const shape = JSON.parse(s.shape) as number[];
        const perModel = shape.includes(m.vocab) || s.op.includes('permute') || (shape.length === 4 && shape[1] === 1) || shape.length < 2;
        if (!perModel && !(shape.length === 2 && shape[0] !== tokens)) blocks += s.bytes;
      }
    const measured = blocks / tokens / m.layers;
    const counted = compiledKept(setupOf(m, o).x).reduce((a, t) => a + t.bytes, 0);
    // fit runs within 3% (the count was built on them; the census spreads the few tensors kept once per model, the
    // embedding's output and the final norm's, over the layers); test runs within the planner's ±10% bar
    const bound = row.role === 'fit' ? 0.03 : 0.1;
    assert.ok(
      Math.abs(counted / measured - 1) < bound,
      `${run.id} (${row.role}): counted ${counted} bytes per token and layer, the partitioner saved ${measured.toFixed(0)}`,
    );
  }
});
