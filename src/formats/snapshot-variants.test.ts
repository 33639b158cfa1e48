/**
 * Memory snapshots in the other shapes users bring them, made here from a real recording (EoR_NN, in
 * ../shared/traces) so that every figure can be compared with the snapshot as recorded:
 * - PyTorch 2.0's layout, whose blocks carry no address (the requested size and frames in the block's history, as
 *   torch/cuda/_memory_viz.py _block_extra_legacy reads them);
 * - the HTML page of memory_viz (PyTorch 2.1 and later: _memory_viz._format_viz embeds the pickle in base64,
 *   padded with NUL bytes to a multiple of 3);
 * - torch.cuda.memory_snapshot()'s list of segments.
 * Both analyze and pool replay must read them with the recording's own figures.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { analyzeFiles } from '../analyze/analyze.js';
import { replay } from '../replay/replay.js';
import { runCli } from '../testing/harness.js';
import { type PickleInput, writePickle } from '../testing/pickle-writer.js';
import { readTrace } from './allocator-trace.js';
import { readPytorchSnapshot } from './pytorch-snapshot.js';

/** ../shared/traces beside the checkout, or beside the folder of worktrees that holds it. */
const shared =
  ['../../../shared/traces/', '../../../../shared/traces/']
    .map((p) => new URL(`${p}EoR_NN/snapshot.pickle.json.gz`, import.meta.url).pathname)
    .find(existsSync) ?? '../shared/traces/EoR_NN/snapshot.pickle.json.gz';
const skip = existsSync(shared) ? false : `${shared} is absent (the shared traces sit beside the checkout)`;
type Block = { address?: number; size: number; requested_size?: number; state: string; frames?: unknown; history?: unknown };
type Snap = { segments: Array<{ address: number; total_size: number; blocks: Block[] }>; device_traces: unknown[][] };
const load = (): Snap => JSON.parse(gunzipSync(readFileSync(shared)).toString()) as Snap;

const dir = mkdtempSync(join(tmpdir(), 'gpumem-snap-variants-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** The snapshot as PyTorch 2.0 wrote it: no block address, a live block's frames in its history (a list of its allocations). */
function asPytorch20(s: Snap): Snap {
  for (const seg of s.segments)
    seg.blocks = seg.blocks.map(({ address, frames, ...b }) =>
      b.state === 'inactive' ? b : { ...b, history: [{ addr: address, real_size: b.requested_size ?? b.size, frames: frames ?? [] }] },
    );
  return s;
}

/** The page torch.cuda._memory_viz.trace_plot writes, around a pickle. */
function memoryVizPage(pickle: Buffer): string {
  const padded = Buffer.concat([pickle, Buffer.alloc(3 - (pickle.length % 3))]);
  const files = JSON.stringify([{ name: 'snapshot.pickle', base64: padded.toString('base64') }]);
  return `\n<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type="module">\nimport {add_local_files} from "https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js"\nconst local_files = ${files}\nadd_local_files(local_files, 'Active Memory Timeline')\n</script>\n</body>\n`;
}

test('a PyTorch 2.0 snapshot (blocks without addresses) reads as the recording does: analyze and pool replay', { skip }, async () => {
  const file = join(dir, 'snapshot-2.0.pickle');
  writeFileSync(file, writePickle(asPytorch20(load()) as unknown as PickleInput));
  const [a, b] = await Promise.all([readPytorchSnapshot(shared), readPytorchSnapshot(file)]);
  // every block placed where it was: its segment's address plus the blocks before it
  assert.deepEqual(
    b.devices.map((d) => d.segments),
    a.devices.map((d) => d.segments),
  );
  assert.equal(
    b.derivedAddresses,
    a.devices[0]!.segments.reduce((n, s) => n + s.blocks.length, 0),
  );
  const [ra, rb] = await Promise.all([analyzeFiles([shared]), analyzeFiles([file])]);
  assert.deepEqual(rb.summary.allocations, ra.summary.allocations);
  assert.ok(rb.summary.notes.some((n) => /blocks carry no address \(PyTorch 2\.0 and before/.test(n)));
  const [pa, pb] = [replay(await readTrace(shared)), replay(await readTrace(file))];
  assert.deepEqual({ ...pb.trace, file: '' }, { ...pa.trace, file: '' });
  assert.deepEqual(pb.configurations, pa.configurations);
  const cli = await runCli(['pool', 'replay', file]);
  assert.equal(cli.code, 0, cli.err);
});

test("memory_viz's HTML page is read as the snapshot it embeds; a page without one is refused by what it is", { skip }, async () => {
  const pickle = writePickle(load() as unknown as PickleInput);
  const page = join(dir, 'memory_timeline.html');
  writeFileSync(page, memoryVizPage(pickle));
  const [a, b] = await Promise.all([analyzeFiles([shared]), analyzeFiles([page])]);
  assert.deepEqual(b.summary.allocations, a.summary.allocations);
  assert.deepEqual(b.findings, a.findings);
  const [pa, pb] = [replay(await readTrace(shared)), replay(await readTrace(page))];
  assert.deepEqual(pb.configurations, pa.configurations);
  const other = join(dir, 'other.html');
  writeFileSync(other, '<!DOCTYPE html><html><body><img src="data:image/png;base64,iVBORw0KGgo="></body></html>');
  for (const args of [
    ['analyze', other],
    ['pool', 'replay', other],
  ]) {
    const cli = await runCli(args);
    assert.equal(cli.code, 2);
    assert.match(cli.err, /an HTML page without a memory snapshot in it/);
    assert.equal(cli.out, '');
  }
});

test("torch.cuda.memory_snapshot()'s list of segments reads as the snapshot's segments", { skip }, async () => {
  const s = load();
  const json = join(dir, 'segments.json');
  writeFileSync(json, JSON.stringify(s.segments));
  const pickle = join(dir, 'segments.pickle');
  writeFileSync(pickle, writePickle(s.segments as unknown as PickleInput));
  const whole = (await analyzeFiles([shared])).summary.allocations.segments;
  for (const f of [json, pickle]) assert.deepEqual((await analyzeFiles([f])).summary.allocations.segments, whole, f);
});
