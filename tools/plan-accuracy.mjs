// The planner against every measured set: runs published with their recipes (fixtures/plan/published/*.json) and
// runs recorded on a GPU (fixtures/plan/measured-peaks*.json). Each row is fed to `gpumem plan` as a person would:
// its config.json (or catalogue name) and the flags that describe the run, with the planner's defaults for the rest.
// Each measured figure says what it measures (allocated = torch.cuda.max_memory_allocated, reserved =
// max_memory_reserved, device = nvidia-smi or a log's total used) and is compared with that planner quantity. A row
// whose flags the planner refuses is printed as "not expressible" with the refusal.
//
// Each set says what its source was to the planner (the file's "split"): built-from (the sets the planner was made
// against; the default), recorded (runs measured on a GPU with gpumem's own scripts), fit (a source whose figures a
// mechanism was read against: evidence of nothing about accuracy) or held-out (a source nothing in the planner was
// read against). Fit and held-out are kept apart by source, one file a source, and reported apart. Serving start-ups
// (gpumem.engine-fixture/1: vLLM and SGLang logs) are compared figure by figure with the plan's serving quantities.
//
// Usage: npm run build && node tools/plan-accuracy.mjs [--json] [fixture.json ...]   (default: every set)
//        GPUMEM_DIST: another built dist/ (as on the GPU machine)
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fromDist } from '../benchmarks/dist.mjs';

const FIXTURES = fileURLToPath(new URL('../fixtures/plan/', import.meta.url));

/** What a measured figure can measure, and the planner quantity each is compared with. */
export const MEASURES = ['allocated', 'reserved', 'device', 'allocated-outside'];

/** What a set's source was to the planner (a fixture's "split"); a file without one is a set it was built from. */
export const SPLITS = ['built-from', 'recorded', 'fit', 'held-out'];

/** Units a source states its figure in; GB and MB are decimal, GiB and MiB binary. */
export const UNITS = { bytes: 1, MB: 1e6, MiB: 2 ** 20, GB: 1e9, GiB: 2 ** 30 };

/** JSON Schema of a fixture file (gpumem.plan-fixture/1). */
export const FIXTURE_SCHEMA = {
  type: 'object',
  required: ['schema', 'set', 'rows'],
  properties: {
    schema: { const: 'gpumem.plan-fixture/1' },
    set: { type: 'string', minLength: 1 },
    split: { enum: SPLITS },
    description: { type: 'string' },
    rows: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['id', 'project', 'source', 'gpu', 'gpus', 'model', 'method', 'flags', 'measured', 'role'],
        properties: {
          id: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]*$' },
          project: { type: 'string', minLength: 1 },
          source: {
            type: 'object',
            required: ['date'],
            properties: {
              url: { type: 'string', pattern: '^https://' },
              repo: { type: 'string', pattern: '^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$' },
              commit: { type: 'string', pattern: '^[0-9a-f]{7,40}$' },
              path: { type: 'string', minLength: 1 },
              script: { type: 'string', minLength: 1 },
              machine: { type: 'string', minLength: 1 },
              date: { type: 'string', pattern: '^\\d{4}-\\d{2}(-\\d{2})?$' },
              quote: { type: 'string', minLength: 1 },
            },
            // a published figure names where it was read; a recorded one names the script that measured it
            anyOf: [{ required: ['url'] }, { required: ['repo', 'commit', 'path'] }, { required: ['script', 'machine'] }],
          },
          gpu: { type: 'string', minLength: 1 },
          gpus: { type: 'integer', minimum: 1 },
          model: { type: 'string', minLength: 1 },
          method: { enum: ['full', 'lora', 'qlora', 'dora', 'infer', 'serve'] },
          flags: { type: 'array', items: { type: 'string', minLength: 1 } },
          measured: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              required: ['measures', 'value', 'unit'],
              properties: {
                measures: { enum: MEASURES },
                value: { type: 'number', exclusiveMinimum: 0 },
                unit: { enum: Object.keys(UNITS) },
                how: { type: 'string' },
              },
            },
          },
          role: { enum: ['fit', 'test'] },
          unitReason: { type: 'string' },
          notModelled: { type: 'array', items: { type: 'string' } },
          note: { type: 'string' },
        },
      },
    },
  },
};

/** Validates a fixture document; answers the errors as text lines (empty when it is well-formed). */
export async function validateFixture(doc) {
  const { default: Ajv } = await import('ajv');
  const ajv = new Ajv({ allErrors: true, strict: false });
  const ok = ajv.validate(FIXTURE_SCHEMA, doc);
  const errors = ok ? [] : ajv.errors.map((e) => `${e.instancePath || '/'} ${e.message}`);
  const ids = new Set();
  for (const r of doc.rows ?? []) {
    if (ids.has(r.id)) errors.push(`/rows id ${r.id} twice`);
    ids.add(r.id);
    if (r.flags?.includes('--model')) errors.push(`/rows ${r.id}: the model goes in "model", not in flags`);
  }
  return errors;
}

/** A figure in bytes. */
export const toBytes = (figure) => figure.value * UNITS[figure.unit];

/**
 * The planner quantity a figure is compared with, from `gpumem plan --json`: perGpu.allocatedPeakBytes for
 * "allocated", perGpu.reservedPeakBytes for "reserved", perGpu.totalBytes for "device", and for "allocated-outside" (the
 * allocated peak plus the memory outside PyTorch: nvidia-smi's peak less the reserved peak, as optimum's
 * tests/benchmark/benchmark_gptq.py benchmark_memory counts it) the total less the caching allocator's reserved share
 * that holds no tensor: allocatedPeakBytes + totalBytes - reservedPeakBytes. A planner that does not
 * report the first two yet gives them from its lines: allocated = total minus every overhead line (context,
 * communication buffers, fragmentation allowance), reserved = total minus the context and communication lines.
 */
export function plannerQuantity(plan, measures) {
  const g = plan.perGpu;
  const overhead = (plan.lines ?? []).filter((l) => l.field === 'overheadBytes');
  const frag = overhead.filter((l) => /fragmentation/.test(l.name)).reduce((s, l) => s + l.bytes, 0);
  if (measures === 'device') return { bytes: g.totalBytes, quantity: 'totalBytes' };
  if (measures === 'allocated-outside') {
    const allocated = plannerQuantity(plan, 'allocated');
    const reserved = plannerQuantity(plan, 'reserved');
    return {
      bytes: allocated.bytes + g.totalBytes - reserved.bytes,
      quantity: `${allocated.quantity} + totalBytes - ${reserved.quantity.includes(' ') ? `(${reserved.quantity})` : reserved.quantity}`,
    };
  }
  if (measures === 'allocated')
    return g.allocatedPeakBytes !== undefined
      ? { bytes: g.allocatedPeakBytes, quantity: 'allocatedPeakBytes' }
      : { bytes: g.totalBytes - g.overheadBytes, quantity: 'totalBytes - overheadBytes' };
  if (measures === 'reserved')
    return g.reservedPeakBytes !== undefined
      ? { bytes: g.reservedPeakBytes, quantity: 'reservedPeakBytes' }
      : { bytes: g.totalBytes - g.overheadBytes + frag, quantity: 'totalBytes - context and communication lines' };
  throw new Error(`unknown measure ${measures}`);
}

/** The rows of a measured-peaks.json written by benchmarks/pytorch/record_training_peaks.py, as fixture rows. */
export function legacyRows(doc, file, configDir) {
  const set = doc.set ?? basename(file, '.json');
  return doc.rows.map((r) => {
    const shape = r.mode === 'train' ? `${r.batch}x${r.seq}` : `${r.batch}x${r.prompt}+${r.newTokens}`;
    const flags =
      r.mode === 'train'
        ? ['--mode', 'train', '--precision', r.precision, '--batch', String(r.batch), '--seq', String(r.seq)]
        : [
            '--mode',
            'infer',
            '--batch',
            String(r.batch),
            '--prompt',
            String(r.prompt),
            '--new-tokens',
            String(r.newTokens),
            '--min-new-tokens',
            String(r.newTokens),
            '--weights',
            'bf16',
          ];
    if (r.recompute && r.recompute !== 'none') flags.push('--recompute', r.recompute);
    if (r.fusedOptimizer) flags.push('--fused-optimizer');
    if (r.attention && r.attention !== 'sdpa') flags.push('--attention', r.attention);
    if (r.baseWeights) flags.push('--base-weights', r.baseWeights);
    if (r.lora) {
      const l = r.lora;
      flags.push('--lora', String(l.r), '--lora-targets', Array.isArray(l.targets) ? l.targets.join(',') : l.targets);
      if (l.adapter_dtype) flags.push('--lora-dtype', l.adapter_dtype);
      if (l.dropout) flags.push('--lora-dropout', String(l.dropout));
      if (l.dora) flags.push('--dora');
    }
    const dir = join(configDir, r.model);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(r.config));
    const adapter = r.lora ? `-${r.lora.dora ? 'dora' : 'lora'}${r.lora.r}-${Array.isArray(r.lora.targets) ? r.lora.targets.join('+') : r.lora.targets}` : '';
    const tag = r.mode === 'train' ? `${r.precision}${adapter}${r.recompute === 'full' ? '-ckpt' : ''}${r.fusedOptimizer ? '-fused' : ''}` : 'generate';
    return {
      id: `${set}-${r.model}-${tag}-${shape}`,
      project: 'gpumem (recorded)',
      source: { script: 'benchmarks/pytorch/record_training_peaks.py', machine: doc.device, date: '2026-12-01' },
      gpu: doc.device,
      gpus: 1,
      model: join(dir, 'config.json'),
      method: r.mode === 'train' ? 'full' : 'infer',
      flags,
      measured: [{ measures: 'allocated', value: r.peakAllocatedBytes, unit: 'bytes' }],
      // a row's own role, else its file's ("fit: ..." in the file's role); the base and variety sets fit nothing since the
      // activation count lost its correction factor (src/plan/activations.ts)
      role: r.role ?? (typeof doc.role === 'string' && doc.role.startsWith('fit') ? 'fit' : 'test'),
    };
  });
}

/** The fixture files of fixtures/plan/: the recorded sets, then the published ones. */
function defaultFiles() {
  return [
    ...readdirSync(FIXTURES)
      .filter((f) => /^measured-peaks.*\.json$/.test(f))
      .sort()
      .map((f) => join(FIXTURES, f)),
    ...readdirSync(join(FIXTURES, 'published'))
      .filter((f) => f.endsWith('.json'))
      .sort()
      .map((f) => join(FIXTURES, 'published', f)),
  ];
}

/** A row's model as the planner takes it: a catalogue name, or a config under fixtures/plan/ (or beside its file). */
function resolveModel(model, file) {
  const base = dirname(file) === resolve(FIXTURES, 'published') ? FIXTURES : dirname(file);
  return model.endsWith('.json') || model.startsWith('configs/') ? resolve(base, model) : model;
}

/** Every training and inference set: [{ file, set, split, rows }], legacy files converted; start-ups left out. */
export async function loadSets(files, configDir) {
  const all = files.length > 0 ? files.map((f) => resolve(f)) : defaultFiles();
  const sets = [];
  for (const file of all) {
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    // serving start-ups (KV tokens, weights) have their own figures: loadEngineSets
    if (doc.schema === 'gpumem.engine-fixture/1') continue;
    if (doc.schema === 'gpumem.measured-peaks/1') {
      const set = doc.set && doc.set !== 'all' ? `measured-peaks-${doc.set}` : basename(file, '.json');
      sets.push({ file, set, split: 'recorded', rows: legacyRows(doc, file, configDir) });
      continue;
    }
    const errors = await validateFixture(doc);
    if (errors.length > 0) throw new Error(`${file}: not a well-formed fixture:\n  ${errors.join('\n  ')}`);
    const split = doc.split ?? 'built-from';
    sets.push({ file, set: doc.set, split, rows: doc.rows.map((r) => ({ ...r, model: resolveModel(r.model, file) })) });
  }
  return sets;
}

/** The serving start-up sets (gpumem.engine-fixture/1): [{ file, set, split, rows }]; fit unless the file says otherwise. */
export function loadEngineSets(files) {
  const all = files.length > 0 ? files.map((f) => resolve(f)) : defaultFiles();
  return all.flatMap((file) => {
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    if (doc.schema !== 'gpumem.engine-fixture/1') return [];
    return [{ file, set: doc.set, split: doc.split ?? 'fit', rows: doc.rows.map((r) => ({ ...r, model: resolveModel(r.model, file) })) }];
  });
}

/**
 * The plan's figure of the kind a start-up figure names, in the figure's unit: weights (the weights line, GiB),
 * kvCache (serving.kvCacheBytes, GiB), kvTokens (serving.kvTokens), nonTorch (the memory outside PyTorch the engine
 * counts, GiB), activationPeak (the profiling run's peak, GiB), kSize (SGLang's K size for the tokens it printed).
 */
export function engineQuantity(plan, figure) {
  const s = plan.serving;
  const line = (pick) => plan.lines.find(pick)?.bytes ?? Number.NaN;
  switch (figure.quantity) {
    case 'weights':
      return line((l) => l.field === 'parametersBytes') / 2 ** 30;
    case 'kvCache':
      return s.kvCacheBytes / 2 ** 30;
    case 'kvTokens':
      return s.kvTokens;
    case 'nonTorch':
      return line((l) => l.name.startsWith('memory outside PyTorch')) / 2 ** 30;
    case 'activationPeak':
      return line((l) => l.field === 'activationsBytes') / 2 ** 30;
    case 'kSize':
      return (s.kvBytesPerToken * (figure.tokens ?? 0)) / 2 / 2 ** 30;
  }
  throw new Error(`unknown start-up quantity ${figure.quantity}`);
}

/** One start-up against the planner: per figure, the published and planned values and the error, or the refusal. */
export async function evaluateEngineRow(row) {
  const r = await runPlan(row.model, row.flags);
  return row.measured
    .filter((figure) => figure.rank !== 'non-driver')
    .map((figure) => {
      if (r.refusal !== undefined) return { row, figure, refusal: r.refusal };
      const planned = engineQuantity(r.plan, figure);
      return { row, figure, planned, version: r.plan.serving?.version, err: planned / figure.value - 1 };
    });
}

/** Start-up figures within ±10%, per quantity: all of them, or those of one role (a figure's own). */
export function summariseEngines(results, role) {
  const of = role === undefined ? results : results.filter((x) => x.figure.role === role);
  const count = (xs) => {
    const expressible = xs.filter((x) => x.refusal === undefined);
    return { figures: xs.length, expressible: expressible.length, within: expressible.filter((x) => Math.abs(x.err) <= 0.1).length };
  };
  const quantities = [...new Set(of.map((x) => x.figure.quantity))];
  return { ...count(of), byQuantity: Object.fromEntries(quantities.map((q) => [q, count(of.filter((x) => x.figure.quantity === q))])) };
}

/** Runs `gpumem plan --json` in this process; answers { plan } or { refusal } (the message of a refused run). */
export async function runPlan(model, flags) {
  const { main } = await fromDist('cli/program.js');
  return runPlanWith(main, model, flags);
}

/** The same through another build's CLI entry (`main` of its cli/program.js). */
export async function runPlanWith(main, model, flags) {
  let out = '';
  let err = '';
  const code = await main(['plan', '--model', model, ...flags, '--json'], { out: (s) => (out += s), err: (s) => (err += s) });
  if (code !== 0)
    return {
      refusal:
        err
          .split('\n')
          .find((l) => l.trim() !== '' && !l.startsWith('(run '))
          ?.trim() ?? `exit ${code}`,
    };
  return { plan: JSON.parse(out) };
}

/** One row against the planner: per figure, the measured and planned bytes and the error, or the refusal. */
export async function evaluateRow(row) {
  const r = await runPlan(row.model, row.flags);
  return row.measured.map((figure) => {
    const measuredBytes = toBytes(figure);
    if (r.refusal !== undefined) return { row, figure, measuredBytes, refusal: r.refusal };
    const q = plannerQuantity(r.plan, figure.measures);
    return { row, figure, measuredBytes, plannedBytes: q.bytes, quantity: q.quantity, err: q.bytes / measuredBytes - 1 };
  });
}

/**
 * Counts for the bar: test figures within ±10%, of those expressible and of all; the same per kind of figure. A fit
 * set is summarised on its fit rows (`role` 'fit'): how well the mechanisms read against it reproduce it.
 */
export function summarise(results, role = 'test') {
  const count = (xs) => {
    const test = xs.filter((x) => x.row.role === role);
    const expressible = test.filter((x) => x.refusal === undefined);
    const within = expressible.filter((x) => Math.abs(x.err) <= 0.1);
    const errs = expressible.map((x) => Math.abs(x.err)).sort((a, b) => a - b);
    const median = errs.length > 0 ? errs[Math.floor((errs.length - 1) / 2)] : undefined;
    return { figures: xs.length, test: test.length, expressible: expressible.length, within: within.length, medianAbsErr: median };
  };
  const byMeasure = Object.fromEntries(MEASURES.map((m) => [m, count(results.filter((x) => x.figure.measures === m))]));
  return { ...count(results), byMeasure };
}

const gib = (b) => (b / 2 ** 30).toFixed(2);
const pct = (e) => `${e >= 0 ? '+' : ''}${(e * 100).toFixed(1)}%`;
const line = (s) => {
  const p = s.expressible > 0 ? ` (${((s.within / s.expressible) * 100).toFixed(0)}%)` : '';
  const m = s.medianAbsErr !== undefined ? `; median |error| ${(s.medianAbsErr * 100).toFixed(1)}%` : '';
  const by = s.byMeasure
    ? ` (${MEASURES.filter((k) => s.byMeasure[k].test > 0)
        .map((k) => `${k}: ${s.byMeasure[k].within} of ${s.byMeasure[k].expressible}`)
        .join(', ')})`
    : '';
  return `test figures: ${s.test}; expressible: ${s.expressible}; within ±10%: ${s.within}${p}${by}${m}`;
};

/** A training or inference set as a table, one line a run, its figures side by side; answers its results. */
async function trainingTable(s, out) {
  const results = [];
  out.push(`\n### ${s.set} (${s.split}; ${s.rows.length} runs)\n`);
  out.push('| run | model | flags | measures | measured (GiB) | planner (GiB) | error | role |');
  out.push('|---|---|---|---|---:|---:|---:|---|');
  for (const row of s.rows) {
    const xs = await evaluateRow(row);
    results.push(...xs.map((x) => ({ ...x, set: s.set, split: s.split })));
    const model = row.model.endsWith('.json') ? basename(dirname(row.model)) : row.model;
    const flags = row.flags.filter((f, i, a) => !(f === '--mode' || a[i - 1] === '--mode')).join(' ');
    const cell = (f) => xs.map(f).join(' / ');
    const refusal = xs[0]?.refusal;
    const planned = refusal === undefined ? cell((x) => gib(x.plannedBytes)) : 'not expressible';
    const err = refusal === undefined ? cell((x) => pct(x.err)) : refusal.replace(/\|/g, '\\|');
    out.push(
      `| ${row.id} | ${model} | ${flags} | ${cell((x) => x.figure.measures)} | ${cell((x) => gib(x.measuredBytes))} | ${planned} | ${err} | ${row.role} |`,
    );
  }
  out.push(`\n${line(summarise(results, s.split === 'fit' ? 'fit' : 'test'))}`);
  return results;
}

/** A start-up set as a table, one line a figure; answers its results. */
async function engineTable(s, out) {
  const results = [];
  out.push(`\n### ${s.set} (${s.split} start-ups; ${s.rows.length} logs)\n`);
  out.push('| start-up | release | quantity | published | planner | error | role |');
  out.push('|---|---|---|---:|---:|---:|---|');
  const show = (v, unit) => (unit === 'tokens' ? String(Math.round(v)) : v.toFixed(2));
  for (const row of s.rows) {
    const xs = await evaluateEngineRow(row);
    results.push(...xs.map((x) => ({ ...x, set: s.set, split: s.split })));
    for (const x of xs) {
      const planned = x.refusal === undefined ? show(x.planned, x.figure.unit) : 'not expressible';
      const err = x.refusal === undefined ? pct(x.err) : x.refusal.replace(/\|/g, '\\|');
      out.push(
        `| ${row.id} | ${row.engineVersion} | ${x.figure.quantity} (${x.figure.unit}) | ${show(x.figure.value, x.figure.unit)} | ${planned} | ${err} | ${x.figure.role} |`,
      );
    }
  }
  out.push(`\n${engineLine(summariseEngines(results))}`);
  return results;
}

const engineLine = (s) =>
  `start-up figures: ${s.figures}; expressible: ${s.expressible}; within ±10%: ${s.within} (${Object.entries(s.byQuantity)
    .map(([q, c]) => `${q}: ${c.within} of ${c.expressible}`)
    .join(', ')})`;

/** The head of the report: each split apart, every held-out source on its own line. */
function heads(training, engines) {
  const of = (xs, split) => xs.filter((x) => x.split === split);
  const sets = (xs) => [...new Set(xs.map((x) => x.set))];
  const out = ['GiB = 2^30 bytes; error = planner / measured - 1'];
  out.push(`sets the planner was built from: ${line(summarise(of(training, 'built-from')))}`);
  out.push(`runs recorded on a GPU: ${line(summarise(of(training, 'recorded')))}`);
  out.push(`held-out sources (nothing was read against them): ${line(summarise(of(training, 'held-out')))}`);
  for (const set of sets(of(training, 'held-out'))) out.push(`  ${set}: ${line(summarise(training.filter((x) => x.set === set)))}`);
  out.push(`fit sources (mechanisms read against them; evidence of nothing), their fit figures: ${line(summarise(of(training, 'fit'), 'fit'))}`);
  for (const set of sets(of(training, 'fit')))
    out.push(
      `  ${set}: ${line(
        summarise(
          training.filter((x) => x.set === set),
          'fit',
        ),
      )}`,
    );
  out.push(`start-ups, fit sources: ${engineLine(summariseEngines(of(engines, 'fit')))}`);
  out.push(`start-ups, held-out sources: ${engineLine(summariseEngines(of(engines, 'held-out')))}`);
  return out;
}

async function cli(argv) {
  const json = argv.includes('--json');
  const files = argv.filter((a) => a !== '--json');
  const configDir = mkdtempSync(join(tmpdir(), 'gpumem-plan-accuracy-'));
  try {
    const training = [];
    const engines = [];
    const out = [];
    for (const s of await loadSets(files, configDir)) training.push(...(await trainingTable(s, out)));
    for (const s of loadEngineSets(files)) engines.push(...(await engineTable(s, out)));
    if (json) {
      const rows = training.map(({ row, figure, measuredBytes, plannedBytes, quantity, err, refusal, set, split }) => ({
        id: row.id,
        set,
        split,
        measures: figure.measures,
        measuredBytes,
        plannedBytes,
        quantity,
        err,
        refusal,
        role: row.role,
      }));
      const startups = engines.map(({ row, figure, planned, err, refusal, set, split }) => ({
        id: row.id,
        set,
        split,
        quantity: figure.quantity,
        published: figure.value,
        unit: figure.unit,
        planned,
        err,
        refusal,
        role: figure.role,
      }));
      const bySplit = Object.fromEntries(
        SPLITS.map((k) => [
          k,
          summarise(
            training.filter((x) => x.split === k),
            k === 'fit' ? 'fit' : 'test',
          ),
        ]),
      );
      const summary = {
        ...summarise(training),
        bySplit,
        startups: { fit: summariseEngines(engines.filter((x) => x.split === 'fit')), heldOut: summariseEngines(engines.filter((x) => x.split === 'held-out')) },
      };
      process.stdout.write(`${JSON.stringify({ summary, rows, startups }, null, 1)}\n`);
    } else {
      console.log(heads(training, engines).join('\n'));
      console.log(out.join('\n'));
    }
  } finally {
    rmSync(configDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  cli(process.argv.slice(2)).catch((e) => {
    console.error(`plan-accuracy: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 2;
  });
}
