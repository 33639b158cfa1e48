import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { savedBytesPerToken } from './activations.js';
import { compiledKeptPerToken, compiledPerOpDropsLastMatmul, compiledPerOpKeptPerToken, compiledSavedBytesPerToken } from './compile-activations.js';
import { readConfigFile } from './config-file.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import type { ModelConfig } from './model-config.js';
import type { TrainOptions } from './options.js';
import { estimateTrain, savedContext } from './train.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONFIGS = `${ROOT}fixtures/plan/configs/`;
const model = (name: string): ModelConfig => readConfigFile(`${CONFIGS}${name}/config.json`);
const train = (i: Partial<PlanInputs>): TrainOptions =>
  planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'train', precision: 'amp-bf16', batch: 4, seq: 512, ...i }) as TrainOptions;

interface CensusRun {
  id: string;
  graphs: Array<{ saved: Array<{ op: string; shape: string; bytes: number }> }>;
}

test("the count per block is what inductor's partitioner saved on an H200, for every family recorded (fit and test)", () => {
  // the census (benchmarks/pytorch/record_compile_peaks.py --census) lists every tensor the compiled forward hands to
  // the backward; the blocks' share is every token-major tensor (not the logits, the causal mask, weight casts, or the
  // per-token loss statistics)
  const census = JSON.parse(readFileSync(`${ROOT}docs/evidence/2026-12-01-1x-h200/compile/census.json`, 'utf8')) as { runs: CensusRun[] };
  const fixture = JSON.parse(readFileSync(`${ROOT}fixtures/plan/measured-peaks-h200-compile.json`, 'utf8')) as {
    rows: Array<{ id: string; model: string; role: string; flags: string[]; details: { lora: { rank: number } | null } }>;
  };
  assert.ok(census.runs.length >= 4, 'the census holds the recorded runs');
  for (const run of census.runs) {
    const row = fixture.rows.find((r) => r.id === run.id);
    assert.ok(row, `${run.id} is a fixture row`);
    const m = model(row.model.split('/')[1]!);
    const flag = (f: string) => row.flags[row.flags.indexOf(f) + 1];
    const tokens = Number(flag('--batch')) * Number(flag('--seq'));
    const rank = row.details.lora?.rank;
    const targets = row.flags.includes('--lora-targets') ? flag('--lora-targets') : undefined;
    const o = train({ compile: true, lora: rank, baseWeights: rank ? 'bf16' : undefined, loraTargets: targets });
    let blocks = 0;
    for (const g of run.graphs)
      for (const s of g.saved) {
        const shape = JSON.parse(s.shape) as number[];
        const perModel = shape.includes(m.vocab) || s.op.includes('permute') || (shape.length === 4 && shape[1] === 1) || shape.length < 2;
        if (!perModel && !(shape.length === 2 && shape[0] !== tokens)) blocks += s.bytes;
      }
    const measured = blocks / tokens / m.layers;
    const counted = compiledSavedBytesPerToken(m, savedContext(m, o), rank ?? 0);
    // fit runs within 3% (the count was built on them; the census spreads the few tensors kept once per model, the
    // embedding's output and the final norm's, over the layers); test runs within the planner's ±10% bar
    const bound = row.role === 'fit' ? 0.03 : 0.1;
    assert.ok(
      Math.abs(counted / measured - 1) < bound,
      `${run.id} (${row.role}): counted ${counted} bytes per token and layer, the partitioner saved ${measured.toFixed(0)}`,
    );
  }
});

test('what a compiled block keeps grows with what trains: full fine-tuning >= LoRA on every linear layer >= PEFT defaults', () => {
  let checked = 0;
  for (const name of readdirSync(CONFIGS)) {
    if (name.endsWith('.json')) continue;
    let m: ModelConfig;
    try {
      m = model(name);
    } catch {
      continue; // a folder without its config.json
    }
    // the base model's share: what the adapters' own branches keep (their A outputs, their copies of an input) aside
    const count = (i: Partial<PlanInputs>) => {
      const o = train({ compile: true, ...i });
      return compiledKeptPerToken(m, savedContext(m, o), o.lora?.rank ?? 0)
        .filter((t) => !t.what.startsWith('LoRA '))
        .reduce((sum, t) => sum + t.bytes, 0);
    };
    const full = count({});
    const all = count({ lora: 16, baseWeights: 'bf16', loraTargets: 'all-linear' });
    assert.ok(full >= all, `${name}: full fine-tuning keeps ${full}, LoRA on every linear layer ${all}`);
    let byDefault: number;
    try {
      byDefault = count({ lora: 16, baseWeights: 'bf16' });
    } catch {
      continue; // PEFT has no default targets for this model_type (refused, named)
    }
    assert.ok(all >= byDefault, `${name}: all-linear keeps ${all}, PEFT's defaults ${byDefault}`);
    // each rank step adds one 16-bit value per adapted layer (the LoRA A outputs lora_B's gradient reads)
    const total = (rank: number) => {
      const o = train({ compile: true, lora: rank, baseWeights: 'bf16' });
      return compiledSavedBytesPerToken(m, savedContext(m, o), rank);
    };
    assert.ok(total(32) > total(16), `${name}: a higher rank keeps more`);
    checked++;
  }
  assert.ok(checked >= 10, 'the families of fixtures/plan/configs were checked');
});

test('a MoE layer and DoRA keep what PyTorch eager keeps (not measured under compile), said so in the line', () => {
  const m = model('mixtral-mini');
  const o = train({ compile: true, lora: 16, baseWeights: 'bf16', loraTargets: 'q_proj,v_proj' });
  const ctx = savedContext(m, o);
  assert.equal(compiledSavedBytesPerToken(m, ctx, 16, true), savedBytesPerToken(m, ctx, true));
  assert.match(compiledKeptPerToken(m, ctx, 16, true)[0]!.what, /not measured under compile/);
  const d = train({ compile: true, lora: 16, baseWeights: 'bf16', dora: true });
  const l = model('llama-3.2-1b');
  assert.equal(compiledSavedBytesPerToken(l, savedContext(l, d), 16), savedBytesPerToken(l, savedContext(l, d)));
});

test('--compile without a checkpoint is planned: the partitioner count, below the checkpoint-free eager count for Llama', () => {
  const m = model('llama-3.2-1b');
  const lora = { lora: 16, baseWeights: 'bf16' } as const; // its peak is the backward pass, where activations count
  const compiled = estimateTrain(m, train({ compile: true, ...lora }));
  const eager = estimateTrain(m, train(lora));
  const act = compiled.lines.find((l) => l.name === 'activations per layer');
  assert.ok(act, 'the activation line is there');
  assert.match(act.note, /min-cut partitioner/);
  // the partitioner recomputes the norms, the SiLU and the casts that eager autograd keeps
  assert.ok(compiled.activationsBytes < eager.activationsBytes, `compiled ${compiled.activationsBytes}, eager ${eager.activationsBytes}`);
  // compile is PyTorch's: Megatron's framework still refuses it, before any count
  assert.throws(() => train({ compile: true, framework: 'megatron' }), /--compile is for --framework pytorch/);
});

test("compiled per-op checkpointing saves what the policy names and the backward reads: not the MLP's last matmul", () => {
  // torchtitan's policy saves every other aten.mm in the order the block runs them: q, v, gate (w1) and down (w2) of a
  // Llama block; the down projection's output only feeds the residual add of the block's output, which no backward reads
  const m = model('llama-3.2-1b');
  const ctx = savedContext(m, train({ compile: true, recompute: 'op' }));
  const kept = compiledPerOpKeptPerToken(m, ctx);
  assert.ok(kept, 'a dense Llama block is counted');
  const names = kept.map((t) => t.what).join('; ');
  for (const saved of ['q_proj', 'v_proj', 'gate_proj']) assert.match(names, new RegExp(saved));
  for (const unsaved of ['k_proj', 'o_proj', 'up_proj', 'down_proj']) assert.doesNotMatch(names, new RegExp(unsaved));
  assert.equal(compiledPerOpDropsLastMatmul(m), true);
  // Gemma 2's norm after the MLP reads the down projection's output: the compiled graph keeps it
  const g = model('gemma-2-2b');
  const gKept = compiledPerOpKeptPerToken(g, savedContext(g, train({ compile: true, recompute: 'op' })));
  assert.match(gKept!.map((t) => t.what).join('; '), /down_proj/);
  assert.equal(compiledPerOpDropsLastMatmul(g), false);
  // MoE layers and DoRA are not counted: the eager count stands
  assert.equal(compiledPerOpKeptPerToken(model('mixtral-mini'), savedContext(model('mixtral-mini'), train({ compile: true }))), undefined);
  assert.equal(compiledPerOpDropsLastMatmul(m, true), false);
});

test('under a checkpoint, --compile keeps less than eager: per-op saves fewer outputs, a recomputed block fewer transients', () => {
  const m = model('llama-3.2-1b');
  const op = { recompute: 'op', batch: 8, seq: 2048 } as const;
  const keptLine = (o: TrainOptions) => estimateTrain(m, o).lines.find((l) => l.name.startsWith('activations: layer inputs'));
  const compiled = keptLine(train({ ...op, compile: true }));
  const eager = keptLine(train(op));
  assert.ok(compiled && eager, 'the per-op line is there');
  assert.match(compiled.name, /compiled: those the backward reads/);
  assert.ok(compiled.bytes < eager.bytes, `compiled ${compiled.bytes}, eager ${eager.bytes}`);
  // full recomputation: the block's input is all either keeps; the recomputed block's compiled graph materialises only
  // what non-fusible ops read, below the eager count of the block (norms' fp32 chains, SiLU, casts fused away)
  const ctx = savedContext(m, train({ recompute: 'full', compile: true }));
  assert.ok(compiledSavedBytesPerToken(m, ctx) < savedBytesPerToken(m, ctx));
  const full = { recompute: 'full', loss: 'chunked', lora: 16, baseWeights: 'bf16', batch: 8, seq: 4096 } as const;
  const peak = (o: TrainOptions) => estimateTrain(m, o).totalBytes;
  assert.ok(peak(train({ ...full, compile: true })) <= peak(train(full)));
});
