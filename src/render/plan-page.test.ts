/** The interactive plan page in headless Chromium: it re-plans offline with every option and refuses what the CLI refuses. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { main } from '../cli/program.js';
import type { PlanResult } from '../plan/plan.js';
import { CHROMIUM, runCli, withChromiumPage } from '../testing/harness.js';

const cli = runCli;

test('the plan page runs the planner in the browser: controls moved, figures equal to the CLI JSON for the same inputs', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-html-'));
  try {
    const html = join(dir, 'plan.html');
    const json = async (args: string[]): Promise<PlanResult> => {
      const r = await cli(['plan', ...args, '--json']);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as PlanResult;
    };
    const base = ['--model', 'llama-3-8b', '--mode', 'train', '--batch', '2', '--seq', '2048'];
    const first = await json([...base, '--html', html]);
    // TinyLlama-1.1B's published config.json, given to the CLI as a file and pasted into the page
    const config = new URL('../../fixtures/plan/configs/tinyllama-1.1b/config.json', import.meta.url).pathname;
    const want = {
      first,
      batch8: await json(['--model', 'llama-3-8b', '--mode', 'train', '--batch', '8', '--seq', '2048']),
      fsdp: await json(['--model', 'llama-3-8b', '--mode', 'train', '--batch', '8', '--seq', '2048', '--gpus', '8', '--zero', '3']),
      vllm: await json(['--model', 'llama-3-8b', '--mode', 'infer', '--engine', 'vllm', '--batch', '8', '--context', '4096', '--new-tokens', '512']),
      pasted: await json(['--model', config, '--mode', 'train', '--batch', '2', '--seq', '2048']),
    };
    const total = (r: PlanResult | undefined) => r?.perGpu.totalBytes;
    const { value, errors } = await withChromiumPage(html, async (page) => {
      const read = () => page.evaluate('window.gpumemPlanResult') as Promise<PlanResult | undefined>;
      const shown = () => page.evaluate('document.getElementById("total").textContent') as Promise<string>;
      const out: Record<string, { result: PlanResult | undefined; shown: string }> = {};
      out.first = { result: await read(), shown: await shown() };
      await page.fill('#batch', '8');
      out.batch8 = { result: await read(), shown: await shown() };
      await page.fill('#gpus', '8');
      await page.selectOption('#zero', '3');
      out.fsdp = { result: await read(), shown: await shown() };
      await page.fill('#gpus', '1');
      await page.selectOption('#zero', '0');
      await page.selectOption('#mode', 'infer');
      await page.selectOption('#engine', 'vllm');
      await page.fill('#context', '4096');
      out.vllm = { result: await read(), shown: (await page.evaluate('document.getElementById("fits").textContent')) as string };
      await page.selectOption('#engine', 'hf');
      await page.selectOption('#mode', 'train');
      await page.fill('#batch', '2');
      await page.fill('#config', readFileSync(config, 'utf8'));
      await page.selectOption('#model', '__pasted');
      out.pasted = { result: await read(), shown: await shown() };
      await page.fill('#config', '{"model_type": "llama", "hidden_size": "lots"}');
      out.bad = { result: await read(), shown: (await page.evaluate('document.getElementById("error").textContent')) as string };
      const chart = await page.evaluate('(() => { const c = window.gpumemCharts[0]; return { type: c.config.type, stacked: c.options.scales.x.stacked }; })()');
      return { out, chart };
    });
    assert.deepEqual(errors, []);
    for (const k of ['first', 'batch8', 'fsdp', 'pasted'] as const) {
      assert.equal(total(value.out[k]!.result), total(want[k]), k);
      assert.equal(value.out[k]!.shown, (want[k].perGpu.totalBytes / 2 ** 30).toFixed(2), `${k}: the page shows the total`);
    }
    assert.equal(value.out.vllm!.result?.serving?.kvTokens, want.vllm.serving!.kvTokens);
    assert.match(value.out.vllm!.shown, new RegExp(`KV cache ${want.vllm.serving!.kvTokens} tokens`));
    assert.equal(value.out.bad!.result, undefined);
    assert.match(value.out.bad!.shown, /hidden_size/);
    assert.deepEqual(value.chart, { type: 'bar', stacked: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gpumem plan --serve serves the same page until Ctrl-C', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  let err = '';
  let out = '';
  const done = main(['plan', '--model', 'gpt-2', '--serve', '--port', '0'], { out: (s) => (out += s), err: (s) => (err += s) });
  const deadline = Date.now() + 10_000;
  while (!/http:\/\/\S+/.test(err) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const url = /http:\/\/\S+/.exec(err)?.[0];
  assert.ok(url, err);
  try {
    const head = await fetch(url, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal((await fetch(new URL('/nothing', url))).status, 404);
    const { value, errors } = await withChromiumPage(url, async (page) => (await page.evaluate('window.gpumemPlanResult')) as PlanResult);
    assert.deepEqual(errors, []);
    assert.equal(value.model.name, 'gpt-2');
    assert.match(out, /gpt-2/);
  } finally {
    process.emit('SIGINT');
    assert.equal(await done, 0);
  }
});

test('the page offers every training option, applies each as the CLI does, and refuses the inputs the CLI refuses', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-page-'));
  try {
    const html = join(dir, 'plan.html');
    const json = async (args: string[]): Promise<PlanResult> => {
      const r = await cli(['plan', '--model', 'llama-3-8b', ...args, '--json']);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as PlanResult;
    };
    await json(['--html', html]);
    const want = {
      lora: await json(['--lora', '16', '--lora-targets', 'all-linear']),
      qlora: await json([
        '--lora',
        '16',
        '--lora-targets',
        'all-linear',
        '--base-weights',
        'nf4',
        '--double-quant',
        '--dora',
        '--lora-dtype',
        'bf16',
        '--lora-dropout',
        '0.05',
      ]),
      oldBnb: await json(['--lora', '16', '--base-weights', 'nf4', '--bnb-version', '0.42']),
      compiled: await json(['--precision', 'bf16-pure', '--loss', 'chunked', '--recompute', 'op', '--compile']),
      compileAlone: await json(['--precision', 'bf16-pure', '--loss', 'chunked', '--compile']),
      compileBlocks: await json(['--precision', 'bf16-pure', '--loss', 'chunked', '--recompute', 'op', '--compile', 'blocks']),
      savers: await json(['--precision', 'bf16-pure', '--optimizer', 'paged-adamw8bit', '--loss', 'chunked', '--recompute', 'op', '--activation-offload']),
      inBackward: await json(['--precision', 'fp8-torchao', '--optimizer-in-backward', '--host-memory', '512GiB']),
    };
    const refusals: Array<[string, RegExp]> = [];
    const { value, errors } = await withChromiumPage(html, async (page) => {
      const read = () => page.evaluate('window.gpumemPlanResult') as Promise<PlanResult | undefined>;
      const error = () => page.evaluate('document.getElementById("error").textContent') as Promise<string>;
      const out: Record<string, PlanResult | undefined> = {};
      await page.fill('#lora', '16');
      await page.fill('#loraTargets', 'all-linear');
      out.lora = await read();
      await page.selectOption('#baseWeights', 'nf4');
      await page.check('#doubleQuant');
      await page.check('#dora');
      await page.selectOption('#loraDtype', 'bf16');
      await page.fill('#loraDropout', '0.05');
      out.qlora = await read();
      for (const id of ['#doubleQuant', '#dora']) await page.uncheck(id);
      await page.selectOption('#loraDtype', '');
      await page.fill('#loraDropout', '');
      await page.fill('#loraTargets', '');
      await page.fill('#bnbVersion', '0.42');
      out.oldBnb = await read();
      await page.fill('#bnbVersion', '');
      await page.fill('#lora', '');
      await page.fill('#loraTargets', '');
      await page.selectOption('#loraDtype', '');
      await page.fill('#loraDropout', '');
      // a 4-bit base with full fine-tuning, as the CLI refuses it
      const shown: Record<string, string> = {};
      shown.fourBit = await error();
      await page.selectOption('#baseWeights', '');
      await page.selectOption('#precision', 'bf16-pure');
      await page.selectOption('#optimizer', 'paged-adamw8bit');
      await page.selectOption('#loss', 'chunked');
      await page.selectOption('#recompute', 'op');
      await page.check('#activationOffload');
      out.savers = await read();
      await page.uncheck('#activationOffload');
      await page.selectOption('#optimizer', 'adamw');
      await page.selectOption('#compile', 'all');
      out.compiled = await read();
      // the blocks only, the loss eager (torchtitan's apply_compile)
      await page.selectOption('#compile', 'blocks');
      out.compileBlocks = await read();
      await page.selectOption('#compile', 'all');
      // compiled without a checkpoint: the partitioner's count, as the CLI plans it
      await page.selectOption('#recompute', 'none');
      out.compileAlone = await read();
      await page.selectOption('#compile', '');
      await page.selectOption('#recompute', 'none');
      await page.selectOption('#loss', 'standard');
      await page.selectOption('#optimizer', 'adamw');
      await page.selectOption('#precision', 'fp8-torchao');
      await page.check('#optimizerInBackward');
      await page.fill('#hostMemory', '512');
      out.inBackward = await read();
      await page.fill('#gradAccum', '4');
      shown.accumulate = await error();
      await page.fill('#gradAccum', '1');
      for (const [id, v, key] of [
        ['#batch', '-3', 'batchNegative'],
        ['#batch', '0', 'batchZero'],
        ['#gpus', '0', 'gpusZero'],
      ] as const) {
        await page.fill(id, v);
        shown[key] = await error();
        out[key] = await read();
        await page.fill(id, '1');
      }
      await page.uncheck('#optimizerInBackward');
      await page.selectOption('#offload', 'optimizer');
      await page.fill('#hostMemory', '0.5');
      shown.hostMemory = await error();
      out.hostMemory = await read();
      return { out, shown };
    });
    assert.deepEqual(errors, []);
    for (const k of ['lora', 'qlora', 'oldBnb', 'compiled', 'compileAlone', 'compileBlocks', 'savers', 'inBackward'] as const) {
      assert.equal(value.out[k]?.perGpu.totalBytes, want[k].perGpu.totalBytes, `${k}: the page plans what the CLI plans`);
      assert.deepEqual(JSON.parse(JSON.stringify(value.out[k]?.options)), want[k].options, `${k}: with the same options (as JSON has them)`);
    }
    refusals.push(
      ['fourBit', /4-bit base .* give --lora R/],
      ['accumulate', /cannot accumulate/],
      ['batchNegative', /--batch must be at least 1, got -3/],
      ['batchZero', /--batch must be at least 1, got 0/],
      ['gpusZero', /--gpus must be at least 1, got 0/],
      ['hostMemory', /--host-memory 0.50 GiB cannot hold it/],
    );
    for (const [k, why] of refusals) assert.match(value.shown[k] ?? '', why, k);
    for (const k of ['batchNegative', 'batchZero', 'gpusZero', 'hostMemory']) assert.equal(value.out[k], undefined, `${k}: no verdict shown`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
