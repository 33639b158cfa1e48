/** `gpumem plan` on the command line: bad input exits 2 with the reason and prints nothing half-done; help offers every option. */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { PlanResult } from '../plan/plan.js';
import { runCli } from '../testing/harness.js';

const cli = runCli;
/** TinyLlama-1.1B's published config.json (a Hugging Face model folder holds it). */
const TINYLLAMA = new URL('../../fixtures/plan/configs/tinyllama-1.1b/config.json', import.meta.url).pathname;

test('bad input: unknown names list the closest, bad configs name the field, impossible layouts name the constraint (exit 2)', async () => {
  const unknown = await cli(['plan', '--model', 'llama-2-8b']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.err, /Closest: .*llama-2-7b/);
  const gpu = await cli(['plan', '--model', 'llama-2-7b', '--gpu', 'h300']);
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

test('plan refuses impossible sizes with the limit, suggests a mistyped option, and will not take a host bench as a GPU', async () => {
  const huge = await cli(['plan', '--model', 'llama-2-7b', '--batch', '1000000000000']);
  assert.equal(huge.code, 2);
  assert.match(huge.err, /at most 1048576/);
  const typo = await cli(['plan', '--modle', 'llama-2-7b']);
  assert.equal(typo.code, 2);
  assert.match(typo.err, /Did you mean .*--model/);
  const help = (await cli(['plan', '--help'])).out.replace(/\s+/g, ' ');
  assert.match(
    help,
    /allocator fragmentation, in percent of the estimate \(default: training replays the step through PyTorch's caching allocator; inference sets aside 5%\)/,
  );
  assert.doesNotMatch(help, /0\.05/);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-bench-'));
  try {
    const bench = JSON.parse(readFileSync(new URL('../../fixtures/bench/h200-bench.json', import.meta.url), 'utf8'));
    bench.environment.backend = 'host';
    const f = join(dir, 'host-bench.json');
    writeFileSync(f, JSON.stringify(bench));
    const r = await cli(['plan', '--model', 'llama-2-7b', '--from-bench', f]);
    assert.equal(r.code, 2);
    assert.match(r.err, /host backend \(no GPU\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every bad input of the training options exits 2 with its reason, before anything is printed', async () => {
  for (const [args, why] of [
    [['--lora', '0'], /--lora must be at least 1/],
    [['--lora', '5000'], /--lora 5000 exceeds the smaller side of every wrapped layer \(at most 4096\)/],
    [['--lora', '8', '--lora-targets', 'c_attn'], /no such module; its linear layers are q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj/],
    [['--lora', '8', '--lora-targets', 'q_proj,,v_proj'], /module names separated by commas/],
    [['--base-weights', 'nf4'], /4-bit base .* cannot be fine-tuned in full: give --lora R/],
    [['--compile', '--framework', 'megatron'], /--compile is for --framework pytorch/],
    [['--compile', 'blocks', '--framework', 'megatron'], /--compile blocks is for --framework pytorch/],
    [['--compile', 'loss'], /argument 'loss' is invalid\. Allowed choices are all, blocks/],
    [['--lora', '8', '--base-weights', 'nf4', '--bnb-version', 'latest'], /--bnb-version takes a release such as 0.42/],
    [['--lora', '8', '--bnb-version', '0.42'], /--bnb-version is for a 4-bit base/],
    [['--bnb-version', '0.42'], /--bnb-version needs adapters: give --lora R/],
    [['--base-weights', 'int8'], /8-bit base/],
    [['--lora', '8', '--double-quant'], /--double-quant .* nf4 or fp4/],
    [['--dora'], /--dora needs adapters/],
    [['--lora-targets', 'all-linear'], /--lora-targets needs adapters/],
    [['--lora', '8', '--lora-dropout', '1.5'], /--lora-dropout must be a fraction/],
    [['--lora', '8', '--precision', 'fp8'], /--lora computes as PEFT does/],
    [['--mode', 'infer', '--zero', '3'], /--zero is for training: it contradicts --mode infer/],
    [['--mode', 'infer', '--lora', '8'], /--lora is for training/],
    [['--mode', 'infer', '--activation-offload'], /--activation-offload is for training/],
    [['--kv-dtype', 'fp8'], /--kv-dtype is for --mode infer/],
    [['--fsdp', '--zero', '1'], /--fsdp and --zero 1 are two strategies: choose one/],
    [['--flash-attention', '--attention', 'eager'], /--flash-attention contradicts --attention eager/],
    [['--optimizer-in-backward', '--grad-accum', '4'], /cannot accumulate/],
    [['--framework', 'megatron', '--recompute', 'op'], /contradicts --framework megatron/],
    [['--offload', 'optimizer', '--host-memory', '0.5GiB'], /offloading places [\d.]+ GiB in pinned host memory .*--host-memory 0.50 GiB cannot hold it/],
    [['--batch', '-3'], /--batch must be at least 1, got -3/],
    [['--gpus', '0'], /--gpus must be at least 1, got 0/],
  ] as Array<[string[], RegExp]>) {
    const r = await cli(['plan', '--model', 'llama-2-7b', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.err, why, args.join(' '));
    assert.equal(r.out, '', `${args.join(' ')}: nothing printed`);
  }
  // the same options without the contradiction plan, and adam8bit is taken as adamw8bit
  for (const args of [
    ['--fsdp', '--zero', '3', '--gpus', '8'],
    ['--flash-attention', '--attention', 'flash'],
    ['--lora', '8', '--base-weights', 'nf4', '--double-quant'],
    ['--optimizer', 'adam8bit'],
  ]) {
    const r = await cli(['plan', '--model', 'llama-2-7b', ...args, '--json']);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.err}`);
    if (args.includes('adam8bit')) assert.equal((JSON.parse(r.out) as { options: { optimizer: string } }).options.optimizer, 'adamw8bit');
  }
});

test('plan --help offers every training option, and a Hugging Face model folder is taken as --model', async () => {
  const help = (await cli(['plan', '--help'])).out.replace(/\s+/g, ' ');
  for (const o of [
    '--lora <r>',
    '--lora-targets',
    '--lora-dtype',
    '--lora-dropout',
    '--dora',
    '--base-weights',
    '--double-quant',
    '--bnb-version <v>',
    '--optimizer-in-backward',
    '--activation-offload',
    '--compile',
    '--loss',
    'paged-adamw8bit',
    'adamw8bit',
    'fp8-torchao',
    '"op"',
    '--host-memory',
  ])
    assert.ok(help.includes(o), o);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-folder-'));
  try {
    const folder = join(dir, 'TinyLlama-1.1B');
    mkdirSync(folder);
    copyFileSync(TINYLLAMA, join(folder, 'config.json'));
    const r = await cli(['plan', '--model', folder, '--lora', '16', '--json']);
    assert.equal(r.code, 0, r.err);
    const p = JSON.parse(r.out) as PlanResult;
    assert.equal(p.model.name, 'TinyLlama-1.1B');
    assert.equal(p.model.parameters, 1_100_048_384, "TinyLlama-1.1B's published parameter count");
    assert.ok(readFileSync(join(folder, 'config.json'), 'utf8').length > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
