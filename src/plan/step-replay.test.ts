/**
 * The replay of a training step through the caching allocator model: its blocks keep what activations.ts counts,
 * it leaves nothing behind between steps, and it gives the reserved peaks of the 40 recorded fit runs
 * (fixtures/plan/measured-peaks-lora-fit.json: the runs the adapter count was built from; the reserved figures were
 * not used to build the replay, which follows the allocator's rules and the order PyTorch runs the ops in).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { linearModules } from './adapters.js';
import { dtypes, savedBytesPerToken, type SavedContext } from './activations.js';
import { blockForward, Tape, type BlockContext } from './block-replay.js';
import { catalogueModel } from './catalogue.js';
import { estimate, type TrainOptions } from './estimate.js';
import { measuredOptions, type MeasuredRow } from './measured.js';
import { normaliseConfig } from './model-config.js';
import { replayTraining } from './step-replay.js';
import { TorchAllocatorModel } from './torch-allocator.js';
import { trainOptions } from '../testing/plan-options.js';

const GPT2_MEDIUM = normaliseConfig({ model_type: 'gpt2', n_embd: 1024, n_layer: 24, n_head: 16, vocab_size: 50257, n_positions: 1024 }, 'test', 'gpt2-medium');

test('a replayed block keeps, tensor by tensor, what activations.ts counts for it', () => {
  const adapters = [
    undefined,
    { targets: /q_proj|v_proj|c_attn/, adapterBytes: 4, dropout: false, dora: false },
    { targets: /./, adapterBytes: 4, dropout: true, dora: false },
    { targets: /q_proj|v_proj|c_attn/, adapterBytes: 2, dropout: false, dora: true },
  ];
  let cases = 0;
  for (const m of [catalogueModel('llama-2-7b'), GPT2_MEDIUM])
    for (const precision of ['fp32', 'amp-bf16', 'bf16-pure'] as const)
      for (const a of adapters) {
        if (a && precision === 'fp32') continue;
        const paths = new Set(
          a
            ? linearModules(m)
                .filter((l) => a.targets.test(l.path))
                .map((l) => l.path)
            : [],
        );
        const ctx: SavedContext = a
          ? { precision, lora: { paths, adapterBytes: a.adapterBytes, dropout: a.dropout, dora: a.dora, baseBytes: 2 } }
          : { precision };
        const { R, C, autocast } = dtypes(ctx);
        const x: BlockContext = {
          m,
          batch: 1,
          seq: 64,
          tp: 1,
          R,
          C,
          autocast,
          full: !a,
          weightBytes: a || precision === 'bf16-pure' ? 2 : 4,
          lora: a && { paths, rank: 16, adapterBytes: a.adapterBytes, dropout: a.dropout, dora: a.dora },
          fusedAttention: true,
          kvCacheCopies: true,
          gradsLeave: false,
          autocastCache: [],
        };
        const t = new Tape(new TorchAllocatorModel(), 64);
        const { block } = blockForward(t, x, t.a(R * m.hidden), true);
        assert.equal(
          block.keptPerToken,
          savedBytesPerToken(m, ctx),
          `${m.name} ${precision} ${a ? JSON.stringify({ ...a, targets: String(a.targets) }) : 'full'}`,
        );
        cases++;
      }
  assert.equal(cases, 18);
});

/** Training as the replay tests run it: pure bf16, batch 2 of 512 tokens, the allocator replayed (no flat allowance). */
const replayRun = (o: Partial<TrainOptions> = {}): TrainOptions => trainOptions({ precision: 'bf16-pure', batch: 2, seq: 512, fragmentation: undefined, ...o });

test('the replay leaves nothing behind: after each step the GPU holds the same tensors, and reserved stays above allocated', () => {
  const m = catalogueModel('llama-3.2-1b');
  const variants: Array<Partial<TrainOptions>> = [
    {},
    { precision: 'amp-bf16', recompute: 'full' },
    { lora: { rank: 16, targets: 'all-linear', dtype: undefined, dropout: true, dora: false, base: 'bf16', doubleQuant: false }, recompute: 'full' },
    { loss: 'chunked', gradAccum: 2, activationOffload: true },
    { lora: { rank: 8, targets: 'default', dtype: 'bf16', dropout: false, dora: true, base: 'bf16', doubleQuant: false }, loss: 'fused' },
    { lora: { rank: 16, targets: 'all-linear', dtype: undefined, dropout: false, dora: false, base: 'nf4', doubleQuant: true }, recompute: 'full' },
    { precision: 'amp-bf16', recompute: 'op', parallel: { gpus: 8, nodes: 1, zero: 3, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 } },
    { recompute: 'op', compile: true, loss: 'chunked', gradAccum: 2 },
  ];
  for (const v of variants) {
    const o = replayRun(v);
    const two = replayTraining(m, o, 'loaded', 2)!;
    const three = replayTraining(m, o, 'loaded', 3)!;
    assert.equal(three.allocatedBytes, two.allocatedBytes, `${JSON.stringify(v)}: a step frees what it allocates`);
    assert.ok(three.peakReservedBytes >= three.peakAllocatedBytes, 'segments hold every block');
    assert.ok(three.peakReservedBytes >= two.peakReservedBytes, 'reserved memory only grows');
  }
  assert.equal(replayTraining(m, replayRun({ framework: 'megatron' })), undefined, "Megatron-LM's buffers are not replayed");
});

test('the 40 fit runs: allocated as counted plus what the replay leaves cached lands within 10% of max_memory_reserved', () => {
  const doc = JSON.parse(readFileSync(new URL('../../fixtures/plan/measured-peaks-lora-fit.json', import.meta.url), 'utf8')) as {
    rows: Array<MeasuredRow & { peakReservedBytes: number }>;
  };
  assert.equal(doc.rows.length, 40);
  let checkpointed = 0;
  for (const r of doc.rows) {
    const m = normaliseConfig(r.config, 'fixture', r.model);
    const o = measuredOptions(r) as TrainOptions;
    const e = estimate(m, o);
    const allocated = e.totalBytes - e.overheadBytes;
    // the recording script built each model in fp32 and cast it to bf16 without emptying the cache
    const replay = replayTraining(m, o, 'fp32-cast')!;
    const reserved = allocated + replay.peakReservedBytes - replay.peakAllocatedBytes;
    const err = reserved / r.peakReservedBytes - 1;
    // the bar: within 10% of the measured figure
    assert.ok(Math.abs(err) <= 0.1, `${r.model} ${r.precision} ${r.recompute} ${r.batch}x${r.seq}: ${(err * 100).toFixed(1)}%`);
    if (r.recompute === 'full') checkpointed++;
  }
  assert.equal(checkpointed, 12, 'the checkpointed runs, where reserved exceeds allocated by up to 59%, are among them');
});
