/**
 * Every family's parameter count against the published count of a real checkpoint (fixtures/plan/configs: each
 * config.json typed from the checkpoint's published config, the count and its source in sources.json), and the
 * layout facts each family's count rests on.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../testing/harness.js';
import { catalogueModel, MODEL_CONFIGS } from './catalogue.js';
import { readConfigFile } from './config-file.js';
import { MODEL_TYPES } from './families.js';
import { normaliseConfig } from './model-config.js';
import { cachedTokenLayers, countParams, kvBytesPerTokenPerLayer } from './params.js';
import type { PlanResult } from './plan.js';

const CONFIGS = fileURLToPath(new URL('../../fixtures/plan/configs/', import.meta.url));
interface Published {
  url: string;
  published: number;
  exact: boolean;
  digits?: number;
  active?: number;
  activeDigits?: number;
  source: string;
}
const SOURCES = JSON.parse(readFileSync(join(CONFIGS, 'sources.json'), 'utf8')) as Record<string, Published | string>;
/** The checkpoints with a published count (other folders under configs/ hold configs for other fixtures). */
const checkpoints = Object.keys(SOURCES).filter((k) => !k.startsWith('_'));

/** `n` rounded to `digits` significant digits. */
const significant = (n: number, digits: number): number => Number(n.toPrecision(digits));
/** True when `published` is `n` rounded or cut to `digits` significant digits (model cards do both). */
function printedAs(n: number, published: number, digits: number): boolean {
  const unit = 10 ** (Math.floor(Math.log10(n)) - digits + 1);
  return significant(n, digits) === published || Math.trunc(n / unit) * unit === published;
}

test('every checkpoint in sources.json has its config, its published count and its source', () => {
  assert.ok(checkpoints.length >= 15);
  for (const name of checkpoints) {
    const s = SOURCES[name];
    assert.ok(s && typeof s === 'object' && s.url.startsWith('https://huggingface.co/') && s.source.length > 0, name);
    assert.ok(readdirSync(join(CONFIGS, name)).includes('config.json'), name);
  }
});

test('each family counts the parameters of a real checkpoint as published (exact where the count is, to its digits where rounded)', () => {
  const families = new Set<string>();
  for (const name of checkpoints) {
    const s = SOURCES[name] as Published;
    const m = readConfigFile(join(CONFIGS, name));
    families.add(m.modelType);
    assert.equal(m.name, name, 'named after its folder');
    const c = countParams(m);
    if (s.exact) assert.equal(c.total, s.published, `${name} (${m.modelType}): ${s.source}`);
    else assert.ok(printedAs(c.total, s.published, s.digits ?? 2), `${name} (${m.modelType}): ${c.total} against ${s.source}`);
    if (s.active !== undefined) assert.ok(printedAs(c.activePerToken, s.active, s.activeDigits ?? 2), `${name}: ${c.activePerToken} active per token`);
  }
  // the families the issue names that have no checkpoint here are in the catalogue's tested counts (plan.test.ts):
  // llama, mistral, mixtral, qwen2, deepseek_v3, gpt2
  for (const t of [
    'gpt_neox',
    'gpt_bigcode',
    'falcon',
    'phi',
    'phi3',
    'gemma',
    'gemma2',
    'gemma3',
    'gemma3_text',
    'qwen3',
    'qwen3_moe',
    'qwen2_moe',
    'starcoder2',
    'olmo',
    'olmo2',
    'deepseek_v2',
  ])
    assert.ok(families.has(t), `a checkpoint of ${t}`);
});

test('catalogue models agree with the checkpoint configs they share a name with', () => {
  const twins: Record<string, string> = { 'phi-3-mini-4k': 'phi-3-mini' };
  let compared = 0;
  for (const name of checkpoints) {
    const key = twins[name] ?? name;
    if (!(key in MODEL_CONFIGS)) continue;
    // a file's notes of the defaults it took are the file's (the catalogue says none)
    const { defaults: _, ...fromFile } = readConfigFile(join(CONFIGS, name));
    assert.deepEqual({ ...catalogueModel(key), name }, fromFile, key);
    compared++;
  }
  assert.ok(compared >= 12, `${compared} catalogue models have a checkpoint config`);
});

test('the layout each count rests on: multi-query, separate output layers, parallel blocks, windows, experts, latent attention', () => {
  const read = (name: string) => readConfigFile(join(CONFIGS, name));
  // gpt_bigcode: multi_query keeps one key/value head; without it SantaCoder would not be the published 1.1B
  const santa = JSON.parse(readFileSync(join(CONFIGS, 'santacoder', 'config.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(read('santacoder').kvHeads, 1);
  assert.ok(!printedAs(countParams(normaliseConfig({ ...santa, multi_query: false }, 'mha')).total, 1.1e9, 2));
  // GPT-NeoX: embed_out is its own matrix; a quarter of each head rotated; attention and MLP in parallel
  const pythia = read('pythia-1.4b');
  assert.equal(countParams(pythia).lmHead, pythia.vocab * pythia.hidden);
  assert.equal(pythia.arch.rotaryFraction, 0.25);
  assert.ok(pythia.arch.parallelResidual);
  // Falcon: the new decoder architecture has num_kv_heads and two norms per layer; Falcon-7B one
  const falcon7 = read('falcon-7b');
  assert.deepEqual([falcon7.kvHeads, falcon7.arch.normsPerLayer], [1, 1]);
  const f40 = normaliseConfig(
    {
      model_type: 'falcon',
      hidden_size: 8192,
      num_hidden_layers: 60,
      num_attention_heads: 128,
      num_kv_heads: 8,
      new_decoder_architecture: true,
      vocab_size: 65024,
    },
    'falcon-40b',
  );
  assert.deepEqual([f40.kvHeads, f40.arch.normsPerLayer], [8, 2]);
  // Gemma: head_dim is not hidden / heads; Gemma 2: every other layer in a 4096 window, both softcaps
  assert.equal(read('gemma-7b').headDim, 256);
  const g2 = read('gemma-2-9b');
  assert.deepEqual([g2.slidingLayers, g2.slidingWindow, g2.arch.attnSoftcap, g2.arch.finalSoftcap], [21, 4096, 50, 30]);
  // Gemma 3: one global layer in six (layers 5, 11, 17, 23 of 26), no softcapping
  const g3 = read('gemma-3-1b');
  assert.deepEqual([g3.slidingLayers, g3.arch.attnSoftcap], [22, undefined]);
  // DeepSeek-V2-Lite: queries projected directly (q_lora_rank null), one dense layer, no router bias
  const ds = read('deepseek-v2-lite');
  assert.deepEqual([ds.mla?.qLoraRank, ds.moe?.denseLayers, ds.moe?.routerBias], [undefined, 1, false]);
  // Qwen-MoE: decoder_sparse_step 2 puts experts in every second layer; mlp_only_layers makes layers dense
  const qm = JSON.parse(readFileSync(join(CONFIGS, 'qwen1.5-moe-a2.7b', 'config.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(normaliseConfig({ ...qm, decoder_sparse_step: 2 }, 'step').moe?.denseLayers, 12);
  assert.equal(normaliseConfig({ ...qm, mlp_only_layers: [0, 1, 2] }, 'only').moe?.denseLayers, 3);
  // OLMo-1's LayerNorm has no parameters: every parameter is in a matrix
  const olmo = read('olmo-7b');
  const c = countParams(olmo);
  assert.equal(c.finalNorm, 0);
  assert.equal(c.denseLayer, 4 * olmo.hidden ** 2 + 3 * olmo.hidden * olmo.intermediate);
});

test('the KV cache per token follows each family: MLA keeps its latent, sliding layers keep at most their window', () => {
  const ds = catalogueModel('deepseek-v2-lite');
  assert.equal(kvBytesPerTokenPerLayer(ds, 2), (512 + 64) * 2, 'the compressed latent and the RoPE key, not heads x head_dim');
  const g2 = catalogueModel('gemma-2-9b');
  assert.equal(kvBytesPerTokenPerLayer(g2, 2), 2 * 8 * 256 * 2);
  assert.equal(cachedTokenLayers(g2, 8192, 42, true), 21 * 8192 + 21 * 4096, 'half the layers keep 4096 tokens');
  assert.equal(cachedTokenLayers(g2, 8192, 42, false), 42 * 8192, 'a cache that ignores windows keeps everything');
  assert.equal(cachedTokenLayers(g2, 1000, 42, true), 42 * 1000, 'below the window every layer keeps every token');
  const mistral = catalogueModel('mistral-7b');
  assert.equal(cachedTokenLayers(mistral, 10000, 32, true), 32 * 4096);
  assert.equal(cachedTokenLayers(catalogueModel('llama-3-8b'), 10000, 32, true), 32 * 10000);
});

test('an unknown or missing model_type is refused with the list of families, never guessed', async () => {
  assert.ok(MODEL_TYPES.length >= 20);
  const base = { hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 100 };
  assert.throws(
    () => normaliseConfig({ ...base, model_type: 'mamba' }, 'x.json'),
    (e: Error) => {
      assert.match(e.message, /unknown model_type "mamba"/);
      for (const t of ['gpt_neox', 'gemma2', 'deepseek_v3', 'qwen3_moe', 'falcon']) assert.ok(e.message.includes(t), t);
      return true;
    },
  );
  assert.throws(() => normaliseConfig(base, 'y.json'), /no "model_type"/);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-family-'));
  try {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...base, model_type: 'rwkv' }));
    const r = await runCli(['plan', '--model', dir]);
    assert.equal(r.code, 2);
    assert.match(r.err, /unknown model_type "rwkv"/);
    assert.equal(r.out, '', 'nothing half-printed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--model takes a Hugging Face model folder holding config.json, and says so when the folder has none', async () => {
  const r = await runCli(['plan', '--model', join(CONFIGS, 'gemma-2-9b'), '--json']);
  assert.equal(r.code, 0, r.err);
  const p = JSON.parse(r.out) as PlanResult;
  assert.equal(p.model.name, 'gemma-2-9b');
  assert.equal(p.model.parameters, (SOURCES['gemma-2-9b'] as Published).published);
  const empty = mkdtempSync(join(tmpdir(), 'gpumem-folder-'));
  try {
    const e = await runCli(['plan', '--model', empty]);
    assert.equal(e.code, 2);
    assert.match(e.err, /holds no config\.json/);
    const missing = await runCli(['plan', '--model', join(empty, 'nothing', 'config.json')]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /no such file or folder/);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test('a config.json without a field its family needs is read with a default, and the plan says which default it took', async () => {
  const full = { model_type: 'llama', hidden_size: 512, num_hidden_layers: 2, num_attention_heads: 8, num_key_value_heads: 2, vocab_size: 1000 };
  const m = normaliseConfig(full, 'cfg.json');
  assert.equal(m.intermediate, 4 * 512, 'the default itself is unchanged');
  assert.deepEqual(m.defaults, ['cfg.json: intermediate_size is not in the config: took 2048 (4 x the hidden size)']);
  assert.equal(normaliseConfig({ ...full, intermediate_size: 1376 }, 'cfg.json').defaults, undefined, 'nothing to say when the field is there');
  const moe = normaliseConfig({ ...full, model_type: 'qwen3_moe', intermediate_size: 1376, moe_intermediate_size: 256, num_experts: 8 }, 'moe.json');
  assert.deepEqual(moe.defaults, ["moe.json: num_experts_per_tok is not in the config: took 8 (Qwen3-30B-A3B's)"]);
  for (const name of Object.keys(MODEL_CONFIGS)) assert.equal(catalogueModel(name).defaults, undefined, `${name}: a catalogue entry says nothing`);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-defaults-'));
  try {
    writeFileSync(join(dir, 'config.json'), JSON.stringify(full));
    for (const mode of ['train', 'infer']) {
      const r = await runCli(['plan', '--model', dir, '--mode', mode, '--json']);
      assert.equal(r.code, 0, r.err);
      const notes = (JSON.parse(r.out) as PlanResult).notes;
      assert.ok(
        notes.some((n) => n.includes('intermediate_size is not in the config: took 2048')),
        `${mode}: ${notes.join(' | ')}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a model path that is not there says so, a Hub id says it is not fetched, and only a plain name gets the closest names', async () => {
  const gone = join(tmpdir(), 'gpumem-no-such-model-folder', 'llama');
  const path = await runCli(['plan', '--model', gone]);
  assert.equal(path.code, 2);
  assert.match(path.err, /no such file or folder/);
  assert.doesNotMatch(path.err, /unknown model|Closest/);
  const hub = await runCli(['plan', '--model', 'meta-llama/Llama-9-8B']);
  assert.equal(hub.code, 2);
  assert.match(hub.err, /no such file or folder, and gpumem does not fetch "meta-llama\/Llama-9-8B" from the Hugging Face Hub/);
  const name = await runCli(['plan', '--model', 'llama-9-8b']);
  assert.equal(name.code, 2);
  assert.match(name.err, /unknown model "llama-9-8b": not a config.json path nor a catalogue name\. Closest: /);
  assert.equal(name.out + hub.out + path.out, '', 'nothing half-printed');
});
