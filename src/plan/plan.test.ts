/**
 * The planner against published tables (ZeRO's model states, Korthikanti et al.'s activations, KV cache sizes,
 * parameter counts) and against peaks measured with PyTorch on an H200 (fixtures/plan/measured-peaks.json).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';
import { catalogueModel } from './catalogue.js';
import { estimate, korthikantiLayerBytes, modelStateBytes, type InferOptions, type Parallelism, type TrainOptions } from './estimate.js';
import { normaliseConfig } from './model-config.js';
import { countParams, kvBytesPerTokenPerLayer } from './params.js';
import type { PlanResult } from './plan.js';

const one: Parallelism = { gpus: 1, nodes: 1, zero: 0, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 };

/** True when `paper` is `ours` rounded or truncated to the digits the paper printed. */
function matchesPrinted(ours: number, paper: string): boolean {
  const decimals = paper.includes('.') ? paper.split('.')[1]!.length : 0;
  const f = 10 ** decimals;
  const p = Number(paper);
  return Math.round(ours * f) / f === p || Math.trunc(ours * f) / f === p;
}

test("ZeRO model-state memory per device matches the paper's Table 1 (7.5B, 128B, 1T; DP 1 to 1024; stages 1-3)", () => {
  // Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", Table 1 (GB = 1e9).
  const table: Record<string, Record<number, [string, string, string]>> = {
    '7.5': {
      1: ['120', '120', '120'],
      4: ['52.5', '41.3', '30'],
      16: ['35.6', '21.6', '7.5'],
      64: ['31.4', '16.6', '1.88'],
      256: ['30.4', '15.4', '0.47'],
      1024: ['30.1', '15.1', '0.12'],
    },
    '128': {
      1: ['2048', '2048', '2048'],
      4: ['896', '704', '512'],
      16: ['608', '368', '128'],
      64: ['536', '284', '32'],
      256: ['518', '263', '8'],
      1024: ['513', '257', '2'],
    },
    '1000': {
      1: ['16000', '16000', '16000'],
      4: ['7000', '5500', '4000'],
      16: ['4750', '2875', '1000'],
      64: ['4187', '2218', '250'],
      256: ['4046', '2054', '62.5'],
      1024: ['4011', '2013', '15.6'],
    },
  };
  for (const [billions, rows] of Object.entries(table)) {
    const psi = Number(billions) * 1e9;
    for (const [dp, cells] of Object.entries(rows)) {
      cells.forEach((paper, i) => {
        const s = modelStateBytes(psi, 'bf16', 'adamw', Number(dp), i + 1);
        const gb = (s.parameters + s.gradients + s.optimizer) / 1e9;
        assert.ok(matchesPrinted(gb, paper), `${billions}B, DP ${dp}, stage ${i + 1}: ours ${gb}, paper ${paper}`);
      });
      const base = modelStateBytes(psi, 'bf16', 'adamw', Number(dp), 0);
      assert.equal((base.parameters + base.gradients + base.optimizer) / 1e9, 16 * Number(billions), 'baseline (2 + 2 + 12) bytes per parameter');
    }
  }
});

test('activation memory per layer follows Korthikanti et al. 2022, Table 2, in every parallel and recompute form', () => {
  for (const [s, b, h, a, t] of [
    [2048, 1, 12288, 96, 8],
    [2048, 4, 4096, 32, 2],
    [4096, 2, 8192, 64, 4],
  ] as const) {
    const sbh = s * b * h;
    assert.equal(korthikantiLayerBytes(s, b, h, a, 1, false, 'none'), sbh * (34 + (5 * a * s) / h));
    assert.equal(korthikantiLayerBytes(s, b, h, a, t, false, 'none'), sbh * (10 + 24 / t + (5 * a * s) / (h * t)));
    assert.equal(korthikantiLayerBytes(s, b, h, a, t, true, 'none'), sbh * (34 / t + (5 * a * s) / (h * t)));
    assert.equal(korthikantiLayerBytes(s, b, h, a, t, false, 'selective'), sbh * (10 + 24 / t));
    assert.equal(korthikantiLayerBytes(s, b, h, a, t, true, 'selective'), (sbh * 34) / t);
    assert.equal(korthikantiLayerBytes(s, b, h, a, t, true, 'full'), 2 * sbh);
  }
  // The megatron framework uses exactly these per layer, times layers per stage and micro-batches in flight.
  const m = catalogueModel('gpt-3-175b');
  const o: TrainOptions = {
    mode: 'train',
    precision: 'bf16',
    optimizer: 'adamw',
    fusedOptimizer: true,
    batch: 1,
    seq: 2048,
    gradAccum: 8,
    recompute: 'selective',
    flashAttention: false,
    framework: 'megatron',
    parallel: { gpus: 64, nodes: 8, zero: 1, tp: 8, sp: true, pp: 8, ep: 1, inFlight: 8 },
    offload: 'none',
    fragmentation: 0,
  };
  const e = estimate(m, o);
  const perLayer = korthikantiLayerBytes(2048, 1, 12288, 96, 8, true, 'selective');
  assert.equal(e.lines.find((l) => l.name.startsWith('activations'))!.bytes, perLayer * (96 / 8) * 8);
});

test('KV cache bytes per token of the Llama 2 and 3 models (bf16)', () => {
  const want: Record<string, number> = {
    'llama-2-7b': 524288,
    'llama-2-13b': 819200,
    'llama-2-70b': 327680,
    'llama-3-8b': 131072,
    'llama-3-70b': 327680,
    'llama-3.1-8b': 131072,
    'llama-3.1-70b': 327680,
    'llama-3.1-405b': 516096,
  };
  for (const [name, bytes] of Object.entries(want)) {
    const m = catalogueModel(name);
    assert.equal(kvBytesPerTokenPerLayer(m, 2) * m.layers, bytes, name);
  }
});

test('parameter counts of catalogue models are the published exact counts', () => {
  const want: Record<string, number> = {
    'gpt-2': 124_439_808,
    'gpt-2-xl': 1_557_611_200,
    'llama-2-7b': 6_738_415_616,
    'llama-2-70b': 68_976_648_192,
    'llama-3-8b': 8_030_261_248,
    'llama-3.1-405b': 405_853_388_800,
    'mistral-7b': 7_241_732_096,
    'mixtral-8x7b': 46_702_792_704,
    'qwen2.5-7b': 7_615_616_512,
    'deepseek-v3': 671_026_419_200,
  };
  for (const [name, n] of Object.entries(want)) assert.equal(countParams(catalogueModel(name)).total, n, name);
  const ds = countParams(catalogueModel('deepseek-v3'));
  assert.ok(Math.abs(ds.activePerToken / 37e9 - 1) < 0.03, `DeepSeek-V3 activates about 37B per token, got ${ds.activePerToken}`);
});

test('against peaks measured with PyTorch on an H200: total - overhead within 10%, parameters within 3%', () => {
  const fixture = JSON.parse(readFileSync(new URL('../../fixtures/plan/measured-peaks.json', import.meta.url), 'utf8')) as {
    rows: Array<Record<string, unknown> & { mode: string; model: string; config: Record<string, unknown>; peakAllocatedBytes: number; parameterBytes: number }>;
  };
  assert.ok(fixture.rows.length >= 30);
  for (const r of fixture.rows) {
    const m = normaliseConfig(r.config, 'fixture', r.model);
    // Which attention kernel PyTorch's SDPA chose, as the measurements show it: at equal tokens, b=2 x s=1024 and
    // b=4 x s=512 differ only by the s x s matrix; they differ for the Llama model in fp32 alone (the math kernel).
    const fused = !(r.model === 'llama-mini' && r.precision === 'fp32');
    const o: TrainOptions | InferOptions =
      r.mode === 'train'
        ? {
            mode: 'train',
            precision: r.precision as TrainOptions['precision'],
            optimizer: 'adamw',
            fusedOptimizer: false,
            batch: r.batch as number,
            seq: r.seq as number,
            gradAccum: 1,
            recompute: 'none',
            flashAttention: fused,
            framework: 'pytorch',
            parallel: one,
            offload: 'none',
            fragmentation: 0.05,
          }
        : {
            mode: 'infer',
            batch: r.batch as number,
            prompt: r.prompt as number,
            newTokens: r.newTokens as number,
            kvDtype: 'bf16',
            blockSize: undefined,
            weights: 'bf16',
            flashAttention: true,
            parallel: one,
            fragmentation: 0.05,
          };
    const e = estimate(m, o);
    const predicted = e.totalBytes - e.overheadBytes;
    const err = predicted / r.peakAllocatedBytes - 1;
    assert.ok(
      Math.abs(err) <= 0.1,
      `${r.mode} ${r.model} ${String(r.precision ?? '')} b=${String(r.batch)}: planner ${predicted}, measured ${r.peakAllocatedBytes} (${(err * 100).toFixed(1)}%)`,
    );
    const paramBytes = e.localParams * (r.mode === 'train' ? 4 : 2);
    assert.ok(Math.abs(paramBytes / r.parameterBytes - 1) <= 0.03, `${r.model} parameter bytes ${paramBytes} vs ${r.parameterBytes}`);
  }
});

const cli = runCli;

test('gpumem plan --json has the documented shape; a plan that does not fit gets suggestions and the largest batch', async () => {
  const r = await cli([
    'plan',
    '--model',
    'llama-2-70b',
    '--mode',
    'train',
    '--precision',
    'bf16',
    '--batch',
    '1',
    '--seq',
    '4096',
    '--gpus',
    '8',
    '--gpu',
    'h100',
    '--flash-attention',
    '--json',
  ]);
  assert.equal(r.code, 0, r.err);
  const p = JSON.parse(r.out) as PlanResult;
  for (const k of ['parametersBytes', 'gradientsBytes', 'optimizerBytes', 'activationsBytes', 'kvCacheBytes', 'overheadBytes', 'totalBytes'] as const)
    assert.equal(typeof p.perGpu[k], 'number', k);
  assert.equal(p.fits, false);
  assert.ok(p.suggestions.length > 0 && p.suggestions.some((s) => s.fits), 'a change that makes it fit');
  assert.ok(p.suggestions.every((s) => s.totalBytes < p.perGpu.totalBytes));
  assert.ok(p.placement.some((x) => x.part === 'optimizer states'));
  const zero3 = p.suggestions.find((s) => s.change.startsWith('ZeRO stage 3'));
  assert.ok(zero3 && zero3.totalBytes < p.perGpu.totalBytes);
  const ok = await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--batch', '8', '--context', '8192', '--new-tokens', '512', '--json']);
  const q = JSON.parse(ok.out) as PlanResult;
  assert.equal(q.fits, true);
  assert.equal(q.perGpu.kvCacheBytes, 131072 * 8 * 8192);
  assert.ok((q.largest.batch ?? 0) > 8 && (q.largest.context ?? 0) === 8192, "the context is capped at the model's 8192 positions");
  const fp8 = JSON.parse(
    (await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--batch', '8', '--context', '8192', '--new-tokens', '512', '--kv-dtype', 'fp8', '--json']))
      .out,
  ) as PlanResult;
  assert.equal(fp8.perGpu.kvCacheBytes, q.perGpu.kvCacheBytes / 2);
  const offload = JSON.parse((await cli(['plan', '--model', 'llama-2-7b', '--precision', 'bf16', '--offload', 'optimizer', '--json'])).out) as PlanResult;
  const os = offload.placement.find((x) => x.part === 'optimizer states')!;
  assert.equal(os.location, 'pinned-host');
  assert.ok(os.secondsPerStep! > 0);
  const text = await cli(['plan', '--model', 'mixtral-8x7b', '--mode', 'infer', '--gpu', 'mi300x']);
  assert.equal(text.code, 0);
  assert.match(text.out, /GiB/);
  assert.match(text.out, /GB\)/);
});

test('bad input: unknown names list the closest, bad configs name the field, impossible layouts name the constraint (exit 2)', async () => {
  const unknown = await cli(['plan', '--model', 'llama-2-8b']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.err, /Closest: .*llama-2-7b/);
  const gpu = await cli(['plan', '--model', 'llama-2-7b', '--gpu', 'h20']);
  assert.equal(gpu.code, 2);
  assert.match(gpu.err, /h200/);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-'));
  try {
    const cases: Record<string, [object | string, RegExp]> = {
      'missing.json': [{ model_type: 'llama', hidden_size: 4096, num_attention_heads: 32, vocab_size: 32000 }, /num_hidden_layers/],
      'heads.json': [
        { model_type: 'llama', hidden_size: 4001, num_hidden_layers: 2, num_attention_heads: 32, vocab_size: 10 },
        /not divisible by num_attention_heads/,
      ],
      'kv.json': [
        { model_type: 'llama', hidden_size: 4096, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 5, vocab_size: 10 },
        /multiple of num_key_value_heads/,
      ],
      'negative.json': [{ model_type: 'llama', hidden_size: -1, num_hidden_layers: 2, num_attention_heads: 32, vocab_size: 10 }, /hidden_size/],
      'types.json': [{ model_type: 'llama', hidden_size: '4096', num_hidden_layers: 2, num_attention_heads: 32, vocab_size: 10 }, /hidden_size/],
      'experts.json': [
        { model_type: 'mixtral', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 10, num_local_experts: 2, num_experts_per_tok: 3 },
        /num_experts_per_tok/,
      ],
      'broken.json': ['{"hidden_size": 4096,', /not valid JSON/],
    };
    for (const [name, [body, why]] of Object.entries(cases)) {
      const f = join(dir, name);
      writeFileSync(f, typeof body === 'string' ? body : JSON.stringify(body));
      const r = await cli(['plan', '--model', f]);
      assert.equal(r.code, 2, name);
      assert.match(r.err, why, name);
      assert.ok(r.err.includes(name), `${name}: the message names the file`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const [args, why] of [
    [['--tp', '3'], /--tp 3 does not divide the 32 attention heads/],
    [['--pp', '3', '--gpus', '3'], /--pp 3 does not divide the 32 layers/],
    [['--gpus', '6', '--tp', '4'], /--gpus 6 is not divisible/],
    [['--batch', '0'], /--batch must be at least 1/],
    [['--zero', '5'], /--zero/],
    [['--sp'], /--sp .*--tp/],
    [['--ep', '2', '--gpus', '2'], /no experts/],
    [['--fragmentation', '150'], /percentage/],
  ] as Array<[string[], RegExp]>) {
    const r = await cli(['plan', '--model', 'llama-2-7b', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.err, why, args.join(' '));
  }
});

test('the plan page has a stacked bar chart and the figures', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-html-'));
  try {
    const html = join(dir, 'plan.html');
    const r = await cli(['plan', '--model', 'llama-3-8b', '--mode', 'train', '--batch', '2', '--seq', '2048', '--flash-attention', '--html', html, '--json']);
    assert.equal(r.code, 0, r.err);
    const p = JSON.parse(r.out) as PlanResult;
    const { value: info, errors } = await inChromium<{ type: string; stacked: boolean; datasets: number; text: string }>(
      html,
      `(() => {
        const c = (window.gpumemCharts || [])[0];
        return { type: c && c.config.type, stacked: c && c.options.scales.x.stacked, datasets: c ? c.data.datasets.length : 0, text: document.body.innerText };
      })()`,
    );
    assert.deepEqual(errors, []);
    assert.equal(info.type, 'bar');
    assert.equal(info.stacked, true);
    assert.ok(info.datasets >= 4);
    assert.ok(info.text.includes((p.perGpu.totalBytes / 2 ** 30).toFixed(2)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
