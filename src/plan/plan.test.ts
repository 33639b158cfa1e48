/**
 * The planner against published tables (ZeRO's model states, Korthikanti et al.'s activations, KV cache sizes,
 * parameter counts) and against peaks measured with PyTorch on an H200 (fixtures/plan/measured-peaks.json).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { runCli } from '../testing/harness.js';
import { inferOptions, ONE_GPU, trainOptions } from '../testing/plan-options.js';
import { catalogueModel } from './catalogue.js';
import { estimate, korthikantiLayerBytes, modelStateBytes, type TrainOptions } from './estimate.js';
import { againstMeasured, type MeasuredRow } from '../testing/plan-measured.js';
import { countParams, kvBytesPerTokenPerLayer } from './params.js';
import type { PlanResult } from './plan.js';

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
    attention: 'eager',
    framework: 'megatron',
    sharding: 'megatron',
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

/** The planner against one measured run, with a label for the failure message. */
function against(r: MeasuredRow): { err: number; paramErr: number; what: string } {
  const { predictedBytes, err, paramErr } = againstMeasured(r);
  return {
    err,
    paramErr,
    what: `${r.mode} ${r.model} ${String(r.precision ?? '')} ${String(r.recompute ?? '')} b=${String(r.batch)}: planner ${predictedBytes}, measured ${r.peakAllocatedBytes}`,
  };
}

const measured = (file: string): MeasuredRow[] =>
  (JSON.parse(readFileSync(new URL(`../../fixtures/plan/${file}`, import.meta.url), 'utf8')) as { rows: MeasuredRow[] }).rows;

/**
 * The bar every measured run is held to. Issue 21 asks ±10% on 90% of held-back runs; the count here keeps every
 * tensor autograd keeps, so each run must land within ±10%, and never more than 5% low: what the count leaves out
 * are small transients (the first backward operation's, the allocator's small blocks), so a larger shortfall means
 * a kept tensor is missing, and a plan that comes out low is one that runs out of memory.
 */
function withinBar(r: MeasuredRow, err: number): boolean {
  // generation (infer.ts) is held to the issue's ±10% alone: its KV cache grows by copies the count does not model
  return r.mode === 'train' ? err >= -0.05 && err <= 0.1 : Math.abs(err) <= 0.1;
}

test('against peaks measured with PyTorch on an H200 (nothing in the count is fit on them): every run within the bar, parameters exact', () => {
  const rows = measured('measured-peaks.json');
  assert.ok(rows.length >= 30);
  for (const r of rows) {
    const { err, paramErr, what } = against(r);
    assert.ok(withinBar(r, err), `${what} (${(err * 100).toFixed(1)}%)`);
    // parameter bytes come from the shape alone: a wrong count is a wrong shape, not an estimate
    assert.equal(Math.round(paramErr * 1e4), 0, `${what}: parameter bytes off by ${(paramErr * 100).toFixed(2)}%`);
  }
});

test('against the variety runs (pure bf16, checkpointing, fused AdamW, Qwen2-0.5B), fit on nothing: every run within the bar', () => {
  const rows = measured('measured-peaks-variety.json');
  assert.ok(rows.length >= 20);
  for (const r of rows) {
    const { err, paramErr, what } = against(r);
    assert.equal(Math.round(paramErr * 1e4), 0, `${what}: parameter bytes off by ${(paramErr * 100).toFixed(2)}%`);
    assert.ok(withinBar(r, err), `${what} (${(err * 100).toFixed(1)}%)`);
  }
  assert.ok(rows.some((r) => r.model === 'qwen2-0.5b' && r.mode === 'infer'));
  assert.ok(rows.some((r) => r.fusedOptimizer === true));
  assert.ok(rows.some((r) => r.precision === 'bf16-pure') && rows.some((r) => r.recompute === 'full'));
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
  assert.ok(p.suggestions.length > 0, 'a change that makes it fit');
  assert.ok(
    p.suggestions.every(
      (s) => s.headroomBytes >= 0 && s.bytesPerGpu < p.perGpu.totalBytes && s.command.startsWith('gpumem plan --model llama-2-70b --gpu h100'),
    ),
  );
  assert.ok(p.placement.some((x) => x.part === 'optimizer states'));
  const ok = await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--batch', '8', '--context', '8192', '--new-tokens', '512', '--json']);
  const q = JSON.parse(ok.out) as PlanResult;
  assert.equal(q.fits, true);
  // the cache at full context is held at the last decode step; the peak of this plan is the prefill (the prompt's
  // cache and 61440 tokens of activations), and perGpu holds what the peak holds
  const kvFull = (r: PlanResult): number =>
    Math.max(...[...r.lines, ...(r.otherMoment?.lines ?? [])].filter((l) => /^KV cache \(\w+\)$/.test(l.name)).map((l) => l.bytes));
  // the last step copies one layer's keys, then its values: at its peak moment one of them may still be a token short
  assert.ok(Math.abs(kvFull(q) - 131072 * 8 * 8192) <= 8 * 131072, `${kvFull(q)} within a token of the full cache`);
  assert.equal(q.perGpu.kvCacheBytes, 131072 * 8 * 8192, 'the cache at its full size');
  assert.ok((q.largest.batch ?? 0) > 8 && (q.largest.context ?? 0) === 8192, "the context is capped at the model's 8192 positions");
  const fp8 = JSON.parse(
    (await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--batch', '8', '--context', '8192', '--new-tokens', '512', '--kv-dtype', 'fp8', '--json']))
      .out,
  ) as PlanResult;
  assert.equal(kvFull(fp8), kvFull(q) / 2);
  const offload = JSON.parse((await cli(['plan', '--model', 'llama-2-7b', '--precision', 'bf16', '--offload', 'optimizer', '--json'])).out) as PlanResult;
  const os = offload.placement.find((x) => x.part === 'optimizer states')!;
  assert.equal(os.location, 'pinned-host');
  assert.ok(os.secondsPerStep! > 0);
  const text = await cli(['plan', '--model', 'mixtral-8x7b', '--mode', 'infer', '--gpu', 'mi300x']);
  assert.equal(text.code, 0);
  assert.match(text.out, /GiB/);
  assert.match(text.out, /GB\)/);
});

test('the breakdown: each kind at its full size, the peak as the lines of one moment, and the page, the text and the JSON agree', async () => {
  for (const args of [
    ['--model', 'gpt-3-175b', '--precision', 'bf16', '--gpus', '64', '--tp', '8', '--sp', '--pp', '8', '--recompute', 'selective', '--framework', 'megatron'],
    ['--model', 'llama-3.1-70b', '--gpus', '8', '--fsdp'],
    ['--model', 'llama-2-7b', '--batch', '4'],
    ['--model', 'llama-3-8b', '--mode', 'infer', '--batch', '8', '--context', '8192'],
  ]) {
    const p = JSON.parse((await cli(['plan', ...args, '--json'])).out) as PlanResult;
    let sum = 0;
    for (const [k, v] of Object.entries(p.atPeak)) {
      if (k === 'totalBytes') continue;
      assert.equal(
        v,
        p.lines.filter((l) => l.field === k).reduce((a, l) => a + l.bytes, 0),
        `${args[1]}: ${k} at the peak is the sum of its lines`,
      );
      assert.ok((p.perGpu as unknown as Record<string, number>)[k]! >= v - 1, `${args[1]}: ${k} at full size is at least what the peak holds`);
      sum += v;
    }
    assert.equal(p.perGpu.totalBytes, sum, `${args[1]}: the peak's kinds add up to the total`);
    assert.equal(p.atPeak.totalBytes, p.perGpu.totalBytes);
    assert.equal(p.marginBytes, p.capacityBytes - p.perGpu.totalBytes);
    const text = (await cli(['plan', ...args])).out;
    assert.match(text, new RegExp(`total \\(peak of the step \\+ overhead\\)\\s+${(p.perGpu.totalBytes / 2 ** 30).toFixed(2)}`));
  }
  // Korthikanti et al.'s activations are the activations field, whichever moment peaks
  const g = JSON.parse(
    (
      await cli([
        'plan',
        '--model',
        'gpt-3-175b',
        '--precision',
        'bf16',
        '--gpus',
        '64',
        '--tp',
        '8',
        '--sp',
        '--pp',
        '8',
        '--recompute',
        'selective',
        '--framework',
        'megatron',
        '--json',
      ])
    ).out,
  ) as PlanResult;
  assert.equal(g.perGpu.activationsBytes, korthikantiLayerBytes(2048, 1, 12288, 96, 8, true, 'selective') * 12 * 8);
});

test('the default attention is SDPA: a fused kernel, except fp32 with grouped-query attention (the math kernel)', () => {
  const gpt = catalogueModel('gpt-2');
  const llama = catalogueModel('llama-3-8b');
  const acts = (m: typeof gpt, o: TrainOptions) => {
    const e = estimate(m, o);
    return [...e.lines, ...(e.otherMoment?.lines ?? [])].filter((l) => l.field === 'activationsBytes');
  };
  assert.ok(!acts(gpt, trainOptions()).some((l) => /attention matrices/.test(l.name)));
  assert.ok(acts(gpt, trainOptions({ attention: 'eager' })).some((l) => /attention matrices/.test(l.name)));
  assert.ok(!acts(llama, trainOptions({ precision: 'amp-bf16' })).some((l) => /attention matrices/.test(l.name)));
  assert.ok(acts(llama, trainOptions({ precision: 'fp32' })).some((l) => /attention matrices/.test(l.name)));
  assert.ok(!acts(llama, trainOptions({ precision: 'fp32', attention: 'flash' })).some((l) => /attention matrices/.test(l.name)));
});

test('pure bf16 training: 2 + 2 + 4 bytes per parameter, no fp32 copy and no autocast cache', () => {
  const m = catalogueModel('llama-2-7b');
  const P = countParams(m).total;
  const e = estimate(m, trainOptions({ precision: 'bf16-pure', fusedOptimizer: true }));
  assert.equal(e.modelStates.parametersBytes, 2 * P);
  assert.equal(e.modelStates.gradientsBytes, 2 * P);
  assert.equal(e.modelStates.optimizerBytes, 4 * P);
  assert.equal(e.autocastCacheBytes, 0);
  const mixed = estimate(m, trainOptions({ precision: 'bf16', fusedOptimizer: true }));
  assert.equal(mixed.modelStates.optimizerBytes, 12 * P, 'fp32 master weights and two fp32 Adam states');
});

test("under FSDP's mixed precision there is no autocast cache: the units are gathered in bf16 and compute without autocast", () => {
  const m = catalogueModel('llama-3.1-70b');
  // torchtitan and torchtune set FSDP2's MixedPrecisionPolicy(param_dtype=bf16): no torch.autocast, no cached casts
  const fsdp = estimate(m, trainOptions({ parallel: { ...ONE_GPU, gpus: 8, zero: 3 } }));
  assert.equal(fsdp.autocastCacheBytes, 0);
  const ddp = estimate(m, trainOptions({ parallel: { ...ONE_GPU, gpus: 8, zero: 1 } }));
  assert.ok(ddp.autocastCacheBytes > 100 * 2 ** 30, 'without sharding autocast caches a copy of every matmul weight');
});

test('serving engines: vLLM and SGLang size the KV cache from what the weights and their working memory leave', async () => {
  // vllm-project/vllm#12330: Llama-3-8B on an A100 40GB at gpu_memory_utilization 0.9 printed "model weights take
  // 14.96GiB" and a budget of 39.50 GiB x 0.9: the weights and the budget are exact here; the rest is estimated.
  const r = JSON.parse(
    (
      await cli([
        'plan',
        '--model',
        'llama-3-8b',
        '--mode',
        'infer',
        '--engine',
        'vllm',
        '--gpu',
        'a100-40',
        '--gpu-memory-utilization',
        '0.9',
        '--max-model-len',
        '8192',
        '--json',
      ])
    ).out,
  ) as PlanResult;
  const s = r.serving!;
  assert.equal(s.engine, 'vllm');
  assert.equal((r.lines[0]!.bytes / 2 ** 30).toFixed(2), '14.96');
  assert.equal((s.budgetBytes / 2 ** 30).toFixed(2), '35.55');
  assert.equal(s.kvBytesPerToken, 131072);
  assert.equal(s.kvTokens, s.kvBlocks * 16);
  assert.equal(s.maxConcurrency, s.kvTokens / 8192);
  assert.ok(s.starts && r.fits);
  assert.equal(
    r.perGpu.totalBytes,
    r.lines.reduce((a, l) => a + l.bytes, 0),
  );
  assert.ok(s.estimated.length > 0, 'says which parts are estimated');
  const text = (await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--engine', 'vllm', '--gpu', 'a100-40'])).out;
  // the line as vLLM logs it (wrapped at the terminal's width: rejoined here)
  assert.match(text.replace(/\n {2,}/g, ' '), /vllm: GPU KV cache size: \d+ tokens .* maximum concurrency for 8192 tokens per request: [\d.]+x/);
  // SGLang: mem_fraction_static x what was free before loading - weights; before 0.5.4 its default by TP size
  const g = JSON.parse(
    (await cli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--engine', 'sglang', '--engine-version', '0.4', '--tp', '2', '--gpus', '2', '--json']))
      .out,
  ) as PlanResult;
  assert.equal(g.serving!.memoryFraction, 0.87);
  assert.equal(g.serving!.blockSize, 1);
  assert.equal(g.serving!.kvBytesPerToken, 131072 / 2, 'key/value heads split over tensor parallel 2');
  // a 70B model in bf16 leaves no KV cache on one H100: the engine would not start, and fp8 or TP are offered
  const big = JSON.parse((await cli(['plan', '--model', 'llama-3.1-70b', '--mode', 'infer', '--engine', 'vllm', '--gpu', 'h100', '--json'])).out) as PlanResult;
  assert.equal(big.serving!.starts, false);
  assert.ok(big.suggestions.some((x) => x.flags.includes('--tp') && x.headroomBytes >= 0));
  for (const [args, message] of [
    [['--engine', 'vllm', '--mode', 'train'], /--engine is for --mode infer/],
    [['--mode', 'infer', '--gpu-memory-utilization', '0.8'], /give --engine vllm/],
    [['--mode', 'infer', '--engine', 'vllm', '--gpu-memory-utilization', '1.5'], /fraction above 0 and at most 1/],
  ] as const) {
    const bad = await cli(['plan', '--model', 'llama-3-8b', ...args]);
    assert.equal(bad.code, 2, args.join(' '));
    assert.match(bad.err, message);
  }
});

test('quantised weights keep the embeddings, the output layer and the norms in 16 bits', () => {
  const m = catalogueModel('llama-3-8b');
  const c = countParams(m);
  const o = inferOptions({ weights: 'int4' });
  // Llama's blocks: linear layers without biases and two RMSNorms; the final norm beside the ends
  const unquantised = c.embedding + c.lmHead + c.finalNorm + m.layers * 2 * m.hidden;
  const got = estimate(m, o).modelStates.parametersBytes;
  assert.ok(Math.abs(got - ((c.total - unquantised) * (0.5 + 2 / 64) + unquantised * 2)) < 1, `${got}`);
});

test('mixture-of-experts and MLA against the published figures', () => {
  // Mixtral 8x7B: 46.7B parameters, 12.9B active per token (Mistral AI's model card)
  const mix = countParams(catalogueModel('mixtral-8x7b'));
  assert.ok(Math.abs(mix.activePerToken / 12.9e9 - 1) < 0.01, `${mix.activePerToken}`);
  // DeepSeek-V3: MLA caches the 512-wide latent and a 64-wide RoPE key per layer (DeepSeek-V2/V3 papers)
  const ds = catalogueModel('deepseek-v3');
  assert.equal(kvBytesPerTokenPerLayer(ds, 2), (512 + 64) * 2);
  assert.equal(kvBytesPerTokenPerLayer(ds, 2) * ds.layers, 70_272);
});

test('--framework megatron: bf16 parameters, fp32 main gradients, the distributed optimizer, no autocast cache, fused Adam', () => {
  const m = catalogueModel('gpt-3-175b');
  const o = trainOptions({
    framework: 'megatron',
    precision: 'amp-bf16',
    recompute: 'selective',
    parallel: { gpus: 64, nodes: 8, zero: 1, tp: 8, sp: true, pp: 8, ep: 1, inFlight: 8 },
  });
  const e = estimate(m, o);
  const P = e.localParams;
  const dp = 64 / 64;
  assert.equal(e.modelStates.parametersBytes, 2 * P);
  assert.equal(e.modelStates.gradientsBytes, 4 * P);
  assert.equal(e.modelStates.optimizerBytes, (12 * P) / dp);
  assert.equal(e.autocastCacheBytes, 0);
  assert.equal(e.optimizerTemporariesBytes, 0);
  assert.equal(e.activationsBytes, korthikantiLayerBytes(2048, 1, 12288, 96, 8, true, 'selective') * 12 * 8);
  // the distributed optimizer shards the 12 bytes over the data-parallel ranks
  const sharded = estimate(m, { ...o, parallel: { ...o.parallel, gpus: 512, nodes: 64 } });
  assert.equal(sharded.modelStates.optimizerBytes, (12 * sharded.localParams) / 8);
});
