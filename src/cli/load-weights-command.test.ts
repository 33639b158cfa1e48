/** `gpumem load-weights` on the host backend: a checkpoint loaded, timed and verified; bad files and options exit 2 with nothing half-printed. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { serializeSafetensors } from '../formats/safetensors.js';
import type { LoadWeightsReport } from '../render/load-weights-text.js';
import { runCli } from '../testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-load-weights-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const file = join(dir, 'model.safetensors');
const tensors = Array.from({ length: 20 }, (_, i) => ({
  name: `layers.${i}.weight`,
  dtype: i % 2 ? ('BF16' as const) : ('F32' as const),
  shape: [16, 8 + i],
  data: Uint8Array.from({ length: 16 * (8 + i) * (i % 2 ? 2 : 4) }, (_, k) => (k * 3 + i) & 0xff),
}));
writeFileSync(file, serializeSafetensors(tensors, { format: 'pt' }));

test('load-weights --json --verify --repeat 2: every tensor, each run timed, every byte matching the file', async () => {
  const r = await runCli(['load-weights', file, '--backend', 'host', '--json', '--verify', '--repeat', '2']);
  assert.equal(r.code, 0, r.err);
  const report = JSON.parse(r.out) as LoadWeightsReport;
  assert.equal(report.backend, 'host');
  assert.equal(report.tensors.length, 20);
  assert.equal(report.reads, 1, 'the whole file is one read');
  assert.equal(
    report.bytes,
    tensors.reduce((s, t) => s + t.data.byteLength, 0),
  );
  assert.equal(report.runs.length, 2);
  assert.ok(report.runs.every((x) => x.gbps > 0 && x.seconds > 0));
  assert.deepEqual(report.paths, ['buffered']);
  assert.equal(report.verified?.ok, true);
  assert.equal(report.verified?.bytes, report.bytes);
});

test('load-weights prints what it loaded, the rate and the path; --filter narrows it', async () => {
  const r = await runCli(['load-weights', dir, '--backend', 'host', '--filter', '^layers\\.1[0-9]\\.']);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /10 tensors/);
  assert.match(r.out, /GB\/s/);
  assert.match(r.out, /file to device: buffered/);
  assert.match(r.out, /layers\.10\.weight\s+F32\s+\[16, 18\]/);
});

test('a bad file, a missing one, a bad filter or device: exit 2 with the reason and nothing on stdout', async () => {
  const bad = join(dir, 'bad.safetensors');
  const h = Buffer.from('{"t":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"u":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(h.byteLength));
  writeFileSync(bad, Buffer.concat([prefix, h, Buffer.from([1, 2, 3, 4])]));
  for (const [args, reason] of [
    [[bad], /overlap/],
    [[join(dir, 'none.safetensors')], /no such file/],
    [[file, '--filter', '('], /--filter/],
    [[file, '--device', '7'], /no device 7/],
  ] as const) {
    const r = await runCli(['load-weights', ...args, '--backend', 'host']);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
    assert.match(r.err, reason);
    assert.equal(r.out, '');
  }
});

test('the size is printed in a unit chosen by its size, beside its binary figure', async () => {
  const big = join(dir, 'four-mib.safetensors');
  writeFileSync(big, serializeSafetensors([{ name: 'w', dtype: 'U8', shape: [4 << 20], data: new Uint8Array(4 << 20) }], { format: 'pt' }));
  const r = await runCli(['load-weights', big, '--backend', 'host']);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /1 tensors?, 4\.19 MB \(4\.0 MiB\)/);
  assert.doesNotMatch(r.out, /0\.00 GB/);
});

test('a model config given for a checkpoint is named as such, not as an index missing its weight_map', async () => {
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 4096 }));
  const r = await runCli(['load-weights', config, '--backend', 'host']);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /a model config \(config\.json.*\), not a checkpoint or a shard index/);
  assert.doesNotMatch(r.err, /weight_map/);
  assert.equal(r.out, '');
});
