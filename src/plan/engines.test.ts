/**
 * The serving plans against start-up logs vLLM and SGLang users published (fixtures/plan/published/engines-*.json):
 * each figure compared with the planner quantity it names, the held-back ones against the bar, and the
 * behaviours each release's accounting implies.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHROMIUM, runCli, withChromiumPage } from '../testing/harness.js';
import { inferOptions, tensorParallel } from '../testing/plan-options.js';
import { catalogueModel } from './catalogue.js';
import { parseEngineVersion } from './engines/registry.js';
import type { InferOptions } from './options.js';
import type { PlanResult } from './plan.js';
import { estimateServe, type ServeOptions } from './serve.js';
import { sglangDefaultFraction } from './engines/sglang.js';
import { VLLM_CONSTANTS } from './engines/vllm.js';
import { GPUS } from '../catalogue/gpus.js';

const PLAN_FIXTURES = fileURLToPath(new URL('../../fixtures/plan/', import.meta.url));
const GiB = 2 ** 30;

interface Figure {
  quantity: 'weights' | 'kvCache' | 'kvTokens' | 'nonTorch' | 'activationPeak' | 'kSize';
  measures: 'allocated' | 'device';
  value: number;
  unit: 'GiB' | 'tokens';
  role: 'fit' | 'test';
  tokens?: number;
  /** A figure a worker printed whose cache is not the one the engine sizes (vLLM V0's non-driver ranks). */
  rank?: 'non-driver';
  /** A figure printed by a pull request's code before it merged, whose accounting no release ships. */
  printedBy?: 'unmerged-code';
}
interface Row {
  id: string;
  source: { url: string; date: string; quote: string };
  engineVersion: string;
  model: string;
  flags: string[];
  measured: Figure[];
}

const readRows = (f: string): Row[] => (JSON.parse(readFileSync(join(PLAN_FIXTURES, 'published', f), 'utf8')) as { rows: Row[] }).rows;
/** The start-ups of the sources the release tables were read against: the bar below holds on these. */
const rows = ['engines-vllm.json', 'engines-sglang.json'].flatMap(readRows);
/** Start-ups from sources nothing was read against: reported apart by tools/plan-accuracy.mjs, never fit. */
const heldOut = readRows('engines-heldout.json');

/** The planner's figure of the kind a measured figure names, in the figure's unit. */
function planned(p: PlanResult, f: Figure): number {
  const s = p.serving!;
  const line = (pick: (l: PlanResult['lines'][number]) => boolean): number => p.lines.find(pick)?.bytes ?? Number.NaN;
  switch (f.quantity) {
    case 'weights':
      return line((l) => l.field === 'parametersBytes') / GiB;
    case 'kvCache':
      return s.kvCacheBytes / GiB;
    case 'kvTokens':
      return s.kvTokens;
    case 'nonTorch':
      return line((l) => l.name.startsWith('memory outside PyTorch')) / GiB;
    case 'activationPeak':
      return line((l) => l.field === 'activationsBytes') / GiB;
    case 'kSize':
      return (s.kvBytesPerToken * (f.tokens ?? 0)) / 2 / GiB;
  }
}

test('every published start-up row names its source, release and figures, each with what it measures and whether it was fit', () => {
  assert.ok(rows.length >= 6 && heldOut.length >= 5);
  for (const r of [...rows, ...heldOut]) {
    assert.match(r.source.url, /^https:\/\/github\.com\/[\w.-]+\/[\w.-]+\/(issues|pull)\/\d+$/, r.id);
    assert.ok(r.source.quote.length > 20 && /^\d{4}-\d{2}-\d{2}$/.test(r.source.date), r.id);
    assert.ok(r.flags.includes(r.engineVersion), `${r.id}: its flags follow its release`);
    for (const f of r.measured) assert.ok(['allocated', 'device'].includes(f.measures) && ['fit', 'test'].includes(f.role), r.id);
  }
  // a held-out source is never fit, and shares no source with the fit start-ups
  assert.ok(heldOut.every((r) => r.measured.every((f) => f.role === 'test')));
  const fitSources = new Set(rows.map((r) => r.source.url));
  for (const r of heldOut) assert.ok(!fitSources.has(r.source.url), `${r.id}: its source is a fit source`);
});

test('the planner against the published start-ups: held-back figures within ±10% on at least 90%, weights within 2%, fit figures reproduced', async () => {
  const results: Array<{ id: string; f: Figure; plan: number; err: number }> = [];
  for (const r of rows) {
    const model = r.model.startsWith('configs/') ? join(PLAN_FIXTURES, r.model) : r.model;
    const out = await runCli(['plan', '--model', model, ...r.flags, '--json']);
    assert.equal(out.code, 0, `${r.id}: ${out.err}`);
    const p = JSON.parse(out.out) as PlanResult;
    assert.equal(p.serving?.version, r.engineVersion, r.id);
    for (const f of r.measured.filter((x) => x.rank !== 'non-driver')) {
      const plan = planned(p, f);
      results.push({ id: r.id, f, plan, err: plan / f.value - 1 });
    }
  }
  const what = (x: (typeof results)[number]) => `${x.id} ${x.f.quantity}: planned ${x.plan.toFixed(3)}, published ${x.f.value} (${(x.err * 100).toFixed(1)}%)`;
  // the weights are exact for the model's shape; the engines' figure adds their rotary caches and small buffers
  for (const x of results.filter((x) => x.f.quantity === 'weights')) assert.ok(Math.abs(x.err) <= 0.02, what(x));
  // SGLang's K size follows from the tokens it prints and the bytes per token of every layer, printed to the hundredth
  for (const x of results.filter((x) => x.f.quantity === 'kSize')) assert.equal(x.plan.toFixed(2), x.f.value.toFixed(2), what(x));
  // a figure a constant was set from is reproduced to the digits published
  for (const x of results.filter((x) => x.f.role === 'fit')) assert.ok(Math.abs(x.plan - x.f.value) <= 0.05, what(x));
  // the bar on the held-back figures
  // a figure whose accounting no release ships is reported (tools/plan-accuracy.mjs), not held to the bar
  const held = results.filter((x) => x.f.role === 'test' && x.f.printedBy !== 'unmerged-code');
  const within = held.filter((x) => Math.abs(x.err) <= 0.1);
  assert.ok(held.length >= 12, `${held.length} held-back figures`);
  assert.ok(
    within.length >= 0.9 * held.length,
    `within ±10%: ${within.length} of ${held.length}\n${held
      .filter((x) => !within.includes(x))
      .map(what)
      .join('\n')}`,
  );
});

const infer = (tp = 1, engineVersion = '0.20'): InferOptions =>
  inferOptions({ engine: 'vllm', serve: { memoryFraction: undefined, maxModelLen: 8192, blockSize: undefined, engineVersion }, parallel: tensorParallel(tp) });
const H100 = 79.22 * GiB;

test('vLLM: the profiling peak does not shrink with TP, CUDA graphs only without --enforce-eager, inside the budget from 0.21', () => {
  const m = catalogueModel('llama-3.1-70b');
  const peak = (tp: number) => estimateServe(m, infer(tp), 'vllm', infer(tp).serve, H100, 'H100').lines.find((l) => l.field === 'activationsBytes')!.bytes;
  assert.ok(peak(8) >= peak(2) * 0.9, 'the sampler over the whole vocabulary is on every rank');
  const serve = (s: Partial<ServeOptions>) => estimateServe(m, infer(4), 'vllm', { ...infer(4).serve, ...s }, H100, 'H100');
  const graphs = (e: ReturnType<typeof serve>) => e.lines.filter((l) => /CUDA graphs/.test(l.name));
  // at the same utilisation (0.21 also raised the default to 0.92)
  const old = serve({ engineVersion: '0.20', memoryFraction: 0.9 });
  const now = serve({ engineVersion: '0.21', memoryFraction: 0.9 });
  assert.equal(graphs(old).length, 1);
  assert.match(graphs(old)[0]!.name, /outside the budget/);
  assert.ok(now.kvCacheBytes < old.kvCacheBytes, 'from 0.21 the graphs come out of the KV cache');
  assert.equal(graphs(serve({ enforceEager: true })).length, 0);
  // before 0.21 eager mode saves the device the graphs; from 0.21 it gives their share to the KV cache
  assert.ok(serve({ engineVersion: '0.20', memoryFraction: 0.9, enforceEager: true }).deviceBytes < old.deviceBytes);
  assert.ok(serve({ engineVersion: '0.21', memoryFraction: 0.9, enforceEager: true }).kvCacheBytes > now.kvCacheBytes);
  // before 0.9.2 the context and NCCL count in the budget; from 0.11 neither: more KV cache, the same device
  assert.ok(serve({ engineVersion: '0.11' }).kvCacheBytes > serve({ engineVersion: '0.9' }).kvCacheBytes);
  // the device holds the budget and what lies outside it
  const e = serve({});
  assert.equal(
    e.deviceBytes,
    e.lines.reduce((a, l) => a + l.bytes, 0),
  );
  assert.ok(e.deviceBytes > e.budgetBytes);
});

test('vLLM: what it counts outside PyTorch, by release, from the context, what loads after it and NCCL', () => {
  const m = catalogueModel('llama-3-8b');
  const GPU = GPUS.h100!;
  const plan = (engineVersion: string, tp: number, gpu = GPU, nvlink = true) =>
    estimateServe(m, infer(tp, engineVersion), 'vllm', infer(tp, engineVersion).serve, gpu.memoryBytes, gpu.name, nvlink);
  const counted = (e: ReturnType<typeof plan>) => e.lines.find((l) => l.name.startsWith('memory outside PyTorch'))!.bytes;
  const outside = (e: ReturnType<typeof plan>) => e.lines.find((l) => /CUDA context/.test(l.name))?.bytes ?? 0;
  const context = GPU.cudaContext!.bytes;
  // 0.6.4 counts the device's whole use less PyTorch's: the context is inside the budget, nothing lies outside
  const near = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1, `${what}: ${a} against ${b}`);
  near(counted(plan('0.6.4', 1)), context + VLLM_CONSTANTS.growthBytes.value, '0.6.4');
  assert.equal(outside(plan('0.6.4', 1)), 0);
  // 0.6.5 and 0.11 measure from a baseline taken after the context: it lies outside, what loads after it inside
  for (const v of ['0.6.5', '0.11']) {
    near(counted(plan(v, 1)), VLLM_CONSTANTS.growthBytes.value, v);
    near(outside(plan(v, 1)), context, v);
  }
  // TP 2 adds NCCL's buffers in every release, whichever baseline the context falls on; less over PCIe
  for (const v of ['0.6.4', '0.6.5', '0.9', '0.11']) {
    near(counted(plan(v, 2)) - counted(plan(v, 1)), VLLM_CONSTANTS.ncclBytes.value, v);
    near(counted(plan(v, 2, GPU, false)) - counted(plan(v, 1, GPU, false)), VLLM_CONSTANTS.ncclPcieBytes.value, v);
  }
  // the context is the GPU's: a smaller one leaves more KV cache where the release counts it, the same where not
  const a100 = GPUS['a100-80']!;
  assert.ok(a100.cudaContext!.bytes < context);
  near(counted(plan('0.6.4', 1, a100)), a100.cudaContext!.bytes + VLLM_CONSTANTS.growthBytes.value, 'A100');
  near(counted(plan('0.6.5', 1, a100)), counted(plan('0.6.5', 1)), 'A100 at 0.6.5');
  // at the same capacity, the KV cache differs by the contexts' difference where the release counts the context only
  const sameSize = (v: string, name: string) => estimateServe(m, infer(1, v), 'vllm', infer(1, v).serve, GPU.memoryBytes, name).kvCacheBytes;
  const block = 16 * 128 * 1024;
  assert.ok(Math.abs(sameSize('0.6.4', a100.name) - sameSize('0.6.4', GPU.name) - (context - a100.cudaContext!.bytes)) <= block, 'KV at 0.6.4');
  assert.ok(Math.abs(sameSize('0.6.5', a100.name) - sameSize('0.6.5', GPU.name)) <= block, 'KV at 0.6.5');
  // a part without a published figure takes the catalogue's smallest and says it is assumed
  const line = plan('0.6.4', 1, GPUS['rtx-3090']!).lines.find((l) => l.name.startsWith('memory outside PyTorch'))!;
  assert.match(line.note, /no published figure .*\(assumed\)/);
});

test('vLLM caches MLA latents on every rank and honours per-layer sliding windows from 0.10; V0 turns interleaved windows off', () => {
  const ds = catalogueModel('deepseek-v2-lite');
  const tp2 = estimateServe(ds, infer(2), 'vllm', infer(2).serve, H100, 'H100');
  assert.equal(tp2.kvBytesPerToken, (512 + 64) * 2 * 27, 'the latent is not split over tensor parallel ranks');
  const g2 = catalogueModel('gemma-2-9b');
  const serve = (v: string) => estimateServe(g2, infer(), 'vllm', { ...infer().serve, engineVersion: v, maxModelLen: 8192 }, H100, 'H100');
  const v1 = serve('0.10');
  const v0 = serve('0.7');
  assert.ok(v1.maxConcurrency > (v1.kvTokens / 8192) * 1.3, 'half the layers keep 4096 of 8192 tokens: more requests than full layers allow');
  assert.equal(v0.maxConcurrency, v0.kvTokens / 8192, 'every layer keeps every token');
});

test('SGLang: its fraction of what is free before loading, its default by GPU memory from 0.5.4, by TP before', () => {
  // server_args.py: an H100's 79.22 GiB less max(512 + 1.5 x 8192 + 2 x 256 + 128, 10240) MiB
  const mem = 79.22 * 1024;
  assert.equal(
    sglangDefaultFraction({ capacityBytes: H100, version: parseEngineVersion('sglang', '0.5.4') }, 1),
    Math.round(((mem - 13440) / mem) * 1000) / 1000,
  );
  assert.equal(sglangDefaultFraction({ capacityBytes: H100, version: parseEngineVersion('sglang', '0.4') }, 2), 0.87);
  const e = estimateServe(
    catalogueModel('llama-3-8b'),
    { ...infer(), engine: 'sglang' },
    'sglang',
    { ...infer().serve, engineVersion: undefined, memoryFraction: 0.9 },
    H100,
    'H100',
  );
  const before = e.lines.find((l) => /before loading/.test(l.name))!.bytes;
  assert.ok(Math.abs(e.budgetBytes - 0.9 * (H100 - before)) < 1, 'the fraction applies to what was free before loading');
});

test('--engine-version and --enforce-eager: refused outside the releases followed (exit 2)', async () => {
  for (const [args, why] of [
    [['--engine-version', '0.10'], /gpumem follows transformers 4\.30 to/],
    [['--enforce-eager'], /--enforce-eager is for --engine vllm or sglang/],
    [['--kv-cache', 'static', '--engine-version', '4.35'], /StaticCache, which --engine-version 4\.35 does not have/],
    [['--engine', 'vllm', '--engine-version', '0.5'], /gpumem follows vLLM 0\.6 to/],
    [['--engine', 'vllm', '--engine-version', 'latest'], /--engine-version takes a release such as/],
    [['--engine', 'sglang', '--engine-version', '9.0'], /gpumem follows SGLang/],
  ] as Array<[string[], RegExp]>) {
    const r = await runCli(['plan', '--model', 'llama-2-13b', '--mode', 'infer', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.err, why);
    assert.equal(r.out, '');
  }
  const ok = await runCli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--engine', 'vllm', '--enforce-eager', '--engine-version', '0.8', '--json']);
  assert.equal(ok.code, 0, ok.err);
  const p = JSON.parse(ok.out) as PlanResult;
  assert.equal(p.serving?.version, '0.8');
  assert.ok(!p.lines.some((l) => /CUDA graphs/.test(l.name)));
});

test('the plan page offers the engine release and eager mode and re-plans with them offline, as the CLI does', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-engines-page-'));
  try {
    const html = join(dir, 'plan.html');
    const base = ['plan', '--model', 'llama-3.1-8b', '--mode', 'infer', '--engine', 'vllm', '--gpu', 'h100'];
    const cli = async (args: string[]) => JSON.parse((await runCli([...base, ...args, '--json'])).out) as PlanResult;
    assert.equal((await runCli([...base, '--html', html])).code, 0);
    const want = { v08: await cli(['--engine-version', '0.8']), eager: await cli(['--engine-version', '0.8', '--enforce-eager']) };
    const { value, errors } = await withChromiumPage(html, async (page) => {
      const read = () => page.evaluate('window.gpumemPlanResult') as Promise<PlanResult | undefined>;
      await page.fill('#engineVersion', '0.8');
      const v08 = await read();
      await page.check('#enforceEager');
      const eager = await read();
      await page.fill('#engineVersion', '0.1');
      const bad = { result: await read(), error: (await page.evaluate('document.getElementById("error").textContent')) as string };
      return { v08, eager, bad };
    });
    assert.deepEqual(errors, []);
    assert.equal(value.v08?.serving?.kvTokens, want.v08.serving?.kvTokens);
    assert.equal(value.eager?.perGpu.totalBytes, want.eager.perGpu.totalBytes);
    assert.ok((value.eager?.perGpu.totalBytes ?? 0) < (value.v08?.perGpu.totalBytes ?? 0), 'no graphs outside the budget in 0.8');
    assert.equal(value.bad.result, undefined);
    assert.match(value.bad.error, /gpumem follows vLLM/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("Hugging Face generate by transformers release: the previous step's cache held before 4.42, every prompt token's logits before 4.45", async () => {
  const plan = async (release: string, newTokens: number): Promise<PlanResult> => {
    const args = ['--batch', '8', '--prompt', '512', '--new-tokens', String(newTokens), '--engine-version', release, '--json'];
    const r = await runCli(['plan', '--model', 'llama-2-13b', '--mode', 'infer', ...args]);
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out) as PlanResult;
  };
  const line = (p: PlanResult, name: RegExp): number => p.lines.find((l) => name.test(l.name))?.bytes ?? 0;
  const [old, mid, now] = [await plan('4.35', 512), await plan('4.42', 512), await plan('4.45', 512)];
  const kv = now.perGpu.kvCacheBytes;
  // the last step of 4.35 ends holding the cache one token shorter beside the new one; 4.42 copies one layer at a time
  assert.ok(Math.abs(line(old, /previous step's cache, held/) / kv - 1) < 0.01, `${line(old, /held/)} against ${kv}`);
  assert.equal(line(mid, /held/), 0);
  const more = (old.perGpu.allocatedPeakBytes ?? 0) - (mid.perGpu.allocatedPeakBytes ?? 0);
  assert.ok(more > 0.9 * kv && more < 1.05 * kv, `4.35 holds ${more} more than 4.42 (a cache is ${kv})`);
  const apart = Math.abs((mid.perGpu.allocatedPeakBytes ?? 0) - (now.perGpu.allocatedPeakBytes ?? 0));
  assert.ok(apart < 2 ** 20, `a long decode peaks at its last step, past the prefill's logits (${apart} bytes apart)`);
  // one new token: the prefill alone, whose logits before 4.45 cover every prompt token (8 x 512 x 32000, in fp32)
  const [prefillMid, prefillNow] = [await plan('4.42', 1), await plan('4.45', 1)];
  const promptLogits = 8 * 512 * catalogueModel('llama-2-13b').vocab * 4;
  assert.ok(line(prefillMid, /logits/) >= promptLogits, `${line(prefillMid, /logits/)} against ${promptLogits}`);
  assert.ok(line(prefillNow, /logits/) < promptLogits / 100);
  // at the upcast the output layer's bf16 logits are alive beside their fp32 copy: the prefill's peak
  const atUpcast = prefillNow.perGpu.parametersBytes + prefillNow.perGpu.kvCacheBytes + promptLogits * 1.5;
  assert.ok((prefillMid.perGpu.allocatedPeakBytes ?? 0) >= atUpcast * 0.999, `${prefillMid.perGpu.allocatedPeakBytes} against ${atUpcast}`);
  assert.ok((prefillNow.perGpu.allocatedPeakBytes ?? 0) < (prefillMid.perGpu.allocatedPeakBytes ?? 0));
  assert.equal(line(prefillMid, /growth/), 0, 'one new token runs no decode step');
});

test("Hugging Face generate by transformers release: each attention layer's rotary cos/sin tables (Llama 4.31-4.37, Mistral and its copies to 4.41), none under AutoAWQ's fused attention", async () => {
  const plan = async (model: string, release: string, ...extra: string[]): Promise<PlanResult> => {
    const args = ['--batch', '1', '--prompt', '64', '--new-tokens', '64', '--engine-version', release, ...extra, '--json'];
    const r = await runCli(['plan', '--model', model, '--mode', 'infer', ...args]);
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out) as PlanResult;
  };
  const tables = (p: PlanResult): number => p.lines.find((l) => /rotary cos\/sin tables/.test(l.name))?.bytes ?? 0;
  const m = catalogueModel('mistral-7b');
  // MistralRotaryEmbedding per attention layer: cos and sin of (max_position_embeddings, head dim) in the load dtype
  const expected = m.layers * 2 * (m.maxPositions ?? 0) * m.headDim * 2;
  const [at436, at441, at442] = [await plan('mistral-7b', '4.36'), await plan('mistral-7b', '4.41'), await plan('mistral-7b', '4.42')];
  assert.equal(tables(at436), expected, `${tables(at436)} against ${expected} (512 MiB for Mistral-7B's 32768 positions)`);
  assert.equal(tables(at441), expected, "Mistral keeps its tables through 4.41 (Qwen2-MoE's 4.40 code copies them)");
  assert.equal(tables(at442), 0, '4.42-4.44 not read: planned without');
  // Llama computes cos and sin in each forward from 4.38
  assert.equal(tables(await plan('llama-2-7b', '4.38')), 0);
  // fp32 weights load in fp32 (the default dtype is the load dtype); before 4.31 Llama's tables were not read
  assert.equal(tables(await plan('mistral-7b', '4.36', '--weights', 'fp32')), 2 * expected);
  assert.equal(tables(await plan('llama-2-7b', '4.30')), 0);
  // Llama-2-7B: 4096 positions, GPT-NeoX (Pythia): only the rotary part of each head (rotary_pct 0.25)
  assert.equal(tables(await plan('llama-2-7b', '4.35')), 32 * 2 * 4096 * 128 * 2);
  const pythia = catalogueModel('pythia-1.4b');
  const rotary = Math.floor(pythia.headDim * pythia.arch.rotaryFraction);
  assert.equal(tables(await plan('pythia-1.4b', '4.35')), pythia.layers * 2 * (pythia.maxPositions ?? 0) * rotary * 2);
  // AutoAWQ's fuse replaces every attention module: its own RoPE table instead
  const awq = ['--weights', 'awq-int4', '--kv-cache', 'awq-fused'];
  assert.equal(tables(await plan('mistral-7b', '4.36', ...awq)), 0);
});

test('Hugging Face generate by transformers release: SDPA repeats grouped key/value heads before 4.54, and after it only where a mask is passed', async () => {
  const repeat = async (...flags: string[]): Promise<number> => {
    const args = ['--batch', '8', '--prompt', '32', '--new-tokens', '992', ...flags, '--json'];
    const r = await runCli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', ...args]);
    assert.equal(r.code, 0, r.err);
    return (JSON.parse(r.out) as PlanResult).lines.find((l) => /repeated to every head/.test(l.name))?.bytes ?? 0;
  };
  const m = catalogueModel('llama-3-8b');
  // at the last decode step (the peak) repeat_kv makes keys and values of every head: 8 sequences x 1024 tokens x 32
  // heads x 128 x 2 bytes each
  const repeated = 2 * 8 * 1024 * m.heads * m.headDim * 2;
  assert.equal(await repeat('--engine-version', '4.53'), repeated);
  assert.equal(await repeat('--engine-version', '4.54'), 0, 'use_gqa_in_sdpa: no mask over unpadded prompts and a growing cache');
  assert.equal(await repeat(), 0, 'the newest release');
  assert.equal(await repeat('--attention', 'eager'), repeated, 'eager attention repeats in every release');
  assert.ok((await repeat('--kv-cache', 'static')) > 0, "a StaticCache's padded slots need a mask");
});
