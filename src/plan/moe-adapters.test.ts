import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { adapterParams } from './adapters.js';
import { readConfigFile } from './config-file.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import { adaptedExpertParams, expertAdapterLines, expertAdapterParams } from './moe-adapters.js';
import type { TrainOptions } from './options.js';
import { countParams } from './params.js';
import { estimateTrain } from './train.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const train = (i: Partial<PlanInputs>): TrainOptions =>
  planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'train', precision: 'amp-bf16', batch: 4, seq: 512, ...i }) as TrainOptions;

interface Row {
  id: string;
  model: string;
  flags: string[];
  details: { lora: { trainableParams: number; rank: number; targets: string; adaptedModules: string[] } | null };
}

test("trainable parameters are PEFT's own count for every recorded LoRA run, Mixtral under all-linear included", () => {
  // get_nb_trainable_parameters() as record_adapter_peaks.py read it on the H200 (PEFT 0.21, transformers 5.17)
  const rows = (JSON.parse(readFileSync(`${ROOT}fixtures/plan/measured-peaks-h200-adapters.json`, 'utf8')) as { rows: Row[] }).rows;
  let moe = 0;
  for (const row of rows) {
    const l = row.details.lora;
    if (!l || row.flags.includes('--dora')) continue;
    const m = readConfigFile(`${ROOT}fixtures/plan/${row.model}`);
    const at = row.flags.indexOf('--lora-targets');
    const o = train({ lora: l.rank, baseWeights: 'bf16', loraTargets: at >= 0 ? row.flags[at + 1] : undefined });
    assert.equal(adapterParams(m, countParams(m), o.lora!), l.trainableParams, `${row.id}: trainable parameters`);
    if (m.moe && l.targets === 'all-linear') {
      moe++;
      assert.ok(l.adaptedModules.includes('experts'), `${row.id}: PEFT wrapped the fused experts`);
    }
  }
  assert.ok(moe >= 1, 'a MoE run under all-linear is among the recorded rows');
});

test("the fused experts are wrapped only under all-linear, gate_up_proj at twice the rank (PEFT's rank_pattern)", () => {
  const m = readConfigFile(`${ROOT}fixtures/plan/configs/mixtral-mini/config.json`);
  const dense = readConfigFile(`${ROOT}fixtures/plan/configs/llama-3.2-1b/config.json`);
  assert.deepEqual(adaptedExpertParams(m, { targets: ['q_proj', 'v_proj'], rank: 16 }), []);
  assert.deepEqual(adaptedExpertParams(dense, { targets: 'all-linear', rank: 16 }), [], 'a dense model has no fused experts');
  const p = adaptedExpertParams(m, { targets: 'all-linear', rank: 8 });
  assert.deepEqual(
    p.map((x) => [x.name, x.rank]),
    [
      ['gate_up_proj', 16],
      ['down_proj', 8],
    ],
  );
  // the count grows linearly in the rank: lora_A and lora_B are rank x experts wide
  assert.equal(expertAdapterParams(m, { targets: 'all-linear', rank: 16 }), 2 * expertAdapterParams(m, { targets: 'all-linear', rank: 8 }));
});

test('wrapped experts keep their merged weights and inputs without a checkpoint; a checkpoint recomputes them', () => {
  const m = readConfigFile(`${ROOT}fixtures/plan/configs/mixtral-mini/config.json`);
  const all = train({ lora: 16, baseWeights: 'bf16', loraTargets: 'all-linear' });
  const lines = expertAdapterLines(m, all.lora!, countParams(m).moeLayers, 4 * 512, 2, 2);
  assert.equal(lines.length, 2);
  const merged = lines[0]!.bytes;
  // the merged weights are the size of the experts' bf16 weights: one copy, whatever the batch
  const expertWeights = countParams(m).moeLayers * m.moe!.experts * 3 * m.hidden * m.moe!.expertIntermediate * 2;
  assert.equal(merged, expertWeights);
  const names = (o: TrainOptions) => estimateTrain(m, o).lines.map((l) => l.name);
  assert.ok(names(all).includes('activations: merged expert weights (LoRA on fused experts)'));
  const gc = train({ lora: 16, baseWeights: 'bf16', loraTargets: 'all-linear', recompute: 'full' });
  assert.ok(!names(gc).some((n) => n.includes('merged expert weights')), 'recomputed under the checkpoint');
});
