/**
 * The accuracy sets (fixtures/plan/published/*.json, fixtures/plan/measured-peaks-*.json) and the tool that judges
 * the planner on them (tools/plan-accuracy.mjs): every row is well-formed and names its source, what its figure
 * measures and its role, and the tool compares each figure with the planner quantity of the same kind. The accuracy
 * bounds are asserted in accuracy.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { MODEL_CONFIGS } from './catalogue.js';

interface Figure {
  measures: string;
  value: number;
  unit: string;
}
interface Row {
  id: string;
  model: string;
  flags: string[];
  measured: Figure[];
  role: string;
  source: Record<string, string>;
}
interface PlanJson {
  perGpu: Record<string, number>;
  lines: { name: string; bytes: number; field: string }[];
}
interface Tool {
  validateFixture(doc: unknown): Promise<string[]>;
  plannerQuantity(plan: PlanJson, measures: string): { bytes: number; quantity: string };
  evaluateRow(row: Row): Promise<{ figure: Figure; measuredBytes: number; plannedBytes?: number; err?: number; refusal?: string }[]>;
  runPlan(model: string, flags: string[]): Promise<{ plan?: PlanJson; refusal?: string }>;
  toBytes(f: Figure): number;
  summarise(results: unknown[]): { test: number; expressible: number; within: number };
}

const plan = fileURLToPath(new URL('../../fixtures/plan/', import.meta.url));
const tool = (): Promise<Tool> => import(new URL('../../tools/plan-accuracy.mjs', import.meta.url).href) as Promise<Tool>;

function fixtureFiles(): string[] {
  return [
    ...readdirSync(join(plan, 'published'))
      .filter((f) => f.endsWith('.json'))
      .map((f) => join(plan, 'published', f)),
    ...readdirSync(plan)
      .filter((f) => /^measured-peaks-.*\.json$/.test(f))
      .map((f) => join(plan, f)),
  ].filter((f) => (JSON.parse(readFileSync(f, 'utf8')) as { schema: string }).schema === 'gpumem.plan-fixture/1');
}

test('every fixture row is well-formed: schema, a source, what its figure measures, its role, a model the planner can read', async () => {
  const { validateFixture } = await tool();
  const files = fixtureFiles();
  assert.ok(
    files.some((f) => f.includes('/published/')),
    'published sets are present',
  );
  assert.ok(
    files.some((f) => f.endsWith('measured-peaks-h200-adapters.json')),
    'the H200 adapter set is present',
  );
  const ids = new Set<string>();
  for (const f of files) {
    const doc = JSON.parse(readFileSync(f, 'utf8')) as { rows: Row[] };
    assert.deepEqual(await validateFixture(doc), [], f);
    for (const r of doc.rows) {
      assert.ok(!ids.has(r.id), `${r.id} appears in two sets`);
      ids.add(r.id);
      // a catalogue name, or a config.json under fixtures/plan/
      if (r.model.endsWith('.json')) assert.ok(existsSync(join(plan, r.model)), `${r.id}: ${r.model} exists`);
      else assert.ok(r.model in MODEL_CONFIGS, `${r.id}: ${r.model} is a catalogue model`);
    }
  }
});

test('the schema refuses a row without a source, with an unknown measure or role, or with the model among the flags', async () => {
  const { validateFixture } = await tool();
  const row = {
    id: 'a-run',
    project: 'p',
    source: { url: 'https://example.org/x', date: '2024-09' },
    gpu: 'A100 80GB',
    gpus: 1,
    model: 'llama-2-7b',
    method: 'lora',
    flags: ['--lora', '8'],
    measured: [{ measures: 'allocated', value: 12.5, unit: 'GB' }],
    role: 'test',
  };
  const doc = (r: Record<string, unknown>): unknown => ({ schema: 'gpumem.plan-fixture/1', set: 's', rows: [r] });
  assert.deepEqual(await validateFixture(doc(row)), []);
  assert.notDeepEqual(await validateFixture(doc({ ...row, source: { date: '2024-09' } })), []);
  assert.notDeepEqual(await validateFixture(doc({ ...row, measured: [{ measures: 'peak', value: 1, unit: 'GB' }] })), []);
  assert.notDeepEqual(await validateFixture(doc({ ...row, measured: [{ measures: 'device', value: 1, unit: 'gigs' }] })), []);
  assert.notDeepEqual(await validateFixture(doc({ ...row, role: 'tuned' })), []);
  assert.notDeepEqual(await validateFixture(doc({ ...row, flags: ['--model', 'x'] })), []);
  assert.notDeepEqual(await validateFixture({ schema: 'gpumem.plan-fixture/1', set: 's', rows: [row, row] }), []);
});

test('a figure is compared with the planner quantity of its kind', async () => {
  const { plannerQuantity } = await tool();
  // a plan that reports all three quantities: each measure takes its own
  const full: PlanJson = {
    perGpu: { totalBytes: 100, overheadBytes: 20, allocatedPeakBytes: 70, reservedPeakBytes: 85 },
    lines: [],
  };
  assert.deepEqual(plannerQuantity(full, 'allocated'), { bytes: 70, quantity: 'allocatedPeakBytes' });
  assert.deepEqual(plannerQuantity(full, 'reserved'), { bytes: 85, quantity: 'reservedPeakBytes' });
  assert.deepEqual(plannerQuantity(full, 'device'), { bytes: 100, quantity: 'totalBytes' });
  // optimum's count: the allocated peak and what the device holds outside the reserved pool (100 - 85)
  assert.equal(plannerQuantity(full, 'allocated-outside').bytes, 85);
  // a plan without them: allocated leaves out every overhead line, reserved keeps the fragmentation allowance
  const lines = [
    { name: 'CUDA/HIP context and library workspaces', bytes: 12, field: 'overheadBytes' },
    { name: 'fragmentation allowance', bytes: 8, field: 'overheadBytes' },
    { name: 'parameters', bytes: 80, field: 'parametersBytes' },
  ];
  const older: PlanJson = { perGpu: { totalBytes: 100, overheadBytes: 20 }, lines };
  assert.equal(plannerQuantity(older, 'allocated').bytes, 80);
  assert.equal(plannerQuantity(older, 'reserved').bytes, 88);
  assert.equal(plannerQuantity(older, 'device').bytes, 100);
  assert.throws(() => plannerQuantity(older, 'peak'));
});

test('the tool runs the real planner with the row flags, and a flag it does not have makes the row not expressible', async () => {
  const { evaluateRow, runPlan, plannerQuantity, summarise } = await tool();
  const flags = ['--mode', 'train', '--precision', 'amp-bf16', '--batch', '2', '--seq', '512'];
  const direct = await runPlan('llama-3.2-1b', flags);
  assert.ok(direct.plan, direct.refusal);
  const row: Row = {
    id: 'r',
    model: 'llama-3.2-1b',
    flags,
    role: 'test',
    source: {},
    measured: [
      { measures: 'allocated', value: 10, unit: 'GiB' },
      { measures: 'device', value: 12, unit: 'GB' },
    ],
  };
  const [allocated, device] = await evaluateRow(row);
  assert.ok(allocated && device);
  assert.equal(allocated.measuredBytes, 10 * 2 ** 30);
  assert.equal(device.measuredBytes, 12e9);
  assert.equal(allocated.plannedBytes, plannerQuantity(direct.plan, 'allocated').bytes);
  assert.equal(device.plannedBytes, direct.plan.perGpu.totalBytes);
  assert.ok(allocated.plannedBytes! < device.plannedBytes!, 'the device figure holds the overhead the allocated one leaves out');
  assert.equal(allocated.err, allocated.plannedBytes! / allocated.measuredBytes - 1);

  const refused = await evaluateRow({ ...row, flags: [...flags, '--no-such-planner-flag', '3'] });
  assert.equal(refused.length, 2);
  for (const x of refused) {
    assert.equal(x.plannedBytes, undefined);
    assert.match(x.refusal ?? '', /no-such-planner-flag/);
  }
  const s = summarise([...refused.map((x) => ({ ...x, row })), { ...allocated, row }, { ...allocated, row: { ...row, role: 'fit' } }]);
  assert.deepEqual([s.test, s.expressible], [3, 1], 'fit rows are not counted; refused rows count as not expressible');
});

test('fit and held-out sets are kept apart by source: one split a file, a held-out source shares nothing with the others', () => {
  const docs = fixtureFiles().map((f) => JSON.parse(readFileSync(f, 'utf8')) as { set: string; split?: string; rows: Row[] });
  const sourceOf = (r: Row): string => r.source.url?.replace(/\/blob\/[0-9a-f]+\//, '/') ?? r.source.script ?? '';
  const heldOut = docs.filter((d) => d.split === 'held-out');
  const others = docs.filter((d) => d.split !== 'held-out');
  assert.ok(heldOut.length >= 3, 'at least one held-out source per kind (training, quantised inference, generate)');
  const elsewhere = new Set(others.flatMap((d) => d.rows.map(sourceOf)));
  for (const d of heldOut) {
    for (const r of d.rows) {
      assert.equal(r.role, 'test', `${r.id}: a held-out row is never fit`);
      assert.ok(!elsewhere.has(sourceOf(r)), `${r.id}: its source is also in a set the planner was built or fit from`);
    }
  }
  for (const d of docs.filter((x) => x.split === 'fit')) for (const r of d.rows) assert.equal(r.role, 'fit', `${r.id} is in a fit set`);
});
