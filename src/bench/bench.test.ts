/**
 * The whole bench and report commands on the host backend: JSON validated against its schema, bad requests exit 2,
 * Ctrl-C stops cleanly, and the HTML pages open in a real headless Chromium with their charts and figures.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';
import { BENCH_JSON_SCHEMA, type BenchReport } from '../formats/bench-schema.js';
import type { Report } from '../report/report.js';

const cli = fileURLToPath(new URL('../cli.js', import.meta.url));

const run = runCli;

/** Opens an HTML file in headless Chromium and answers what the page shows. */
async function inBrowser(file: string): Promise<{ charts: number; drawn: number; canvases: number; text: string; errors: string[] }> {
  const { value, errors } = await inChromium<{ charts: number; drawn: number; canvases: number; text: string }>(
    file,
    `(() => {
      const charts = window.gpumemCharts || [];
      let painted = 0;
      for (const c of document.querySelectorAll('canvas')) {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) { painted++; break; }
      }
      const withData = charts.filter((c) => c.data.datasets.some((d) => d.data.some((v) => typeof v === 'number' || typeof v?.y === 'number'))).length;
      return { charts: charts.length, drawn: Math.min(withData, painted), canvases: document.querySelectorAll('canvas').length, text: document.body.innerText };
    })()`,
  );
  return { ...value, errors };
}

test('gpumem bench --json on the host backend: every test group, verified, valid against the schema', async () => {
  const r = await run(['bench', '--backend', 'host', '--quick', '--max-size', '1MiB', '--json']);
  assert.equal(r.code, 0, r.err);
  const report = JSON.parse(r.out) as BenchReport;
  const ajv = new Ajv({ allErrors: true, strict: false });
  const valid = ajv.validate(BENCH_JSON_SCHEMA, report);
  assert.ok(valid, JSON.stringify(ajv.errors));
  assert.equal(report.environment.backend, 'host');
  assert.deepEqual(report.environment.failures, []);
  const groups = new Set(report.results.map((x) => x.test));
  for (const g of ['copy', 'sm-copy', 'managed', 'zero-copy', 'stream', 'cache', 'access', 'latency', 'alloc']) assert.ok(groups.has(g), g);
  assert.ok(report.results.every((x) => x.verified));
  const h2d = report.results.filter((x) => x.test === 'copy' && x.direction === 'HtoD');
  assert.deepEqual([...new Set(h2d.map((x) => x.srcKind))].sort(), ['mapped', 'pageable', 'pinned', 'pinned-wc']);
  assert.ok(report.results.some((x) => x.direction === 'bidirectional' && x.counted === 'both-directions'));
  assert.ok(report.results.some((x) => x.test === 'stream' && x.direction === 'triad' && x.counted === 'read+write'));
  assert.ok(report.results.some((x) => x.engine === 'gpumem-pool' && x.medianUs !== undefined));
  assert.match(r.err, /\[device 0\] copies/, 'progress goes to stderr');
});

test('gpumem bench measures peers on two (host) devices and refuses impossible requests with exit 2', async () => {
  const saved = process.env.GPUMEM_HOST_DEVICES;
  process.env.GPUMEM_HOST_DEVICES = '2';
  try {
    const r = await run(['bench', '--backend', 'host', '--quick', '--only', 'peer', '--max-size', '256KiB', '--json']);
    assert.equal(r.code, 0, r.err);
    const rows = (JSON.parse(r.out) as BenchReport).results;
    assert.deepEqual([...new Set(rows.map((x) => `${x.device}->${x.peer} ${x.direction} ${x.engine} ${x.peerAccess}`))].sort(), [
      '0->1 bidirectional copy-engine false',
      '0->1 bidirectional copy-engine true',
      '0->1 latency copy-engine false',
      '0->1 latency copy-engine true',
      '0->1 one-way copy-engine false',
      '0->1 one-way copy-engine true',
      '0->1 one-way sm true',
      '1->0 bidirectional copy-engine false',
      '1->0 bidirectional copy-engine true',
      '1->0 latency copy-engine false',
      '1->0 latency copy-engine true',
      '1->0 one-way copy-engine false',
      '1->0 one-way copy-engine true',
      '1->0 one-way sm true',
    ]);
    // every row verified; the latency rows in microseconds, the SM rows only where peer access is on
    for (const x of rows) assert.equal(x.verified, true);
    for (const x of rows.filter((y) => y.direction === 'latency')) assert.ok(x.medianUs! > 0 && x.bytes === 4);
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_HOST_DEVICES;
    else process.env.GPUMEM_HOST_DEVICES = saved;
  }
  for (const args of [
    ['--only', 'peer'],
    ['--device', '7'],
    ['--max-size', '0'],
    ['--max-size', 'lots'],
    ['--max-size', '4PiB'],
    ['--only', 'warp-drive'],
  ]) {
    const r = await run(['bench', '--backend', 'host', '--quick', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
    assert.ok(r.err.length > 0);
  }
});

test('Ctrl-C stops the bench, prints what it had measured, frees what it allocated, and exits 130', { timeout: 120_000 }, async () => {
  // The host backend's measurement under way can outlast the CLI's one-second grace on a loaded machine (the process
  // then ends with nothing printed, which cli/signals.test.ts covers); this test is about what a clean stop prints.
  const env = { ...process.env, GPUMEM_STOP_GRACE_MS: '60000' };
  const child = spawn(process.execPath, [cli, 'bench', '--backend', 'host', '--json'], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let err = '';
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  // the copies are done once the managed-memory group starts: interrupt then, so the copy rows are finished work
  const started = new Promise<void>((resolve) =>
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (/managed memory/.test(err)) resolve();
    }),
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  const first = await Promise.race([started.then(() => 'started' as const), exited.then(() => 'exited' as const)]);
  assert.equal(first, 'started', `the managed group never started:\n${err}`);
  child.kill('SIGINT');
  assert.equal(await exited, 130, err);
  assert.match(err, /every allocation was freed/);
  const report = JSON.parse(out) as BenchReport;
  assert.equal(report.environment.interrupted, true);
  assert.ok(
    report.results.some((r) => r.test === 'copy'),
    'the copy rows finished before the interrupt are printed',
  );
  assert.ok(!report.results.some((r) => r.test === 'alloc'), 'nothing after the interrupt was measured');
});

test('bench refuses a --max-size below 64 KiB and a device named twice, before measuring', async () => {
  for (const [args, reason] of [
    [['--max-size', '4KiB'], /--max-size must be at least 64KiB/],
    [['--device', '0', '0'], /--device 0 is given twice/],
  ] as const) {
    const r = await run(['bench', '--backend', 'host', '--quick', ...args]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, reason);
    assert.equal(r.out, '', 'nothing half-printed');
  }
});

test('gpumem report on the host backend prints its measurements and says that a GPU strategy needs a GPU', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-report-'));
  try {
    const html = join(dir, 'report.html');
    const r = await run(['report', '--backend', 'host', '--max-size', '1MiB', '--json', '--html', html]);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out) as Report;
    assert.equal(report.schema, 'gpumem.report/1');
    assert.match(report.hostNotice ?? '', /host backend.*needs GPU figures/);
    assert.equal(report.bench.environment.mode, 'quick');
    assert.ok(report.bench.results.length > 10, 'the measurements are there');
    assert.deepEqual(report.advice, [], 'no strategy drawn from CPU memcpy figures');
    const text = await run(['report', '--backend', 'host', '--max-size', '1MiB']);
    assert.equal(text.code, 0);
    assert.ok(text.out.startsWith('NOTE: No GPU was found'), text.out.slice(0, 80));
    assert.deepEqual(
      text.out.split('\n').filter((l) => l.length > 80),
      [],
      'no line wider than 80 columns where no terminal says its width',
    );
    assert.match(text.out, /== strategy ==\nNo strategy on the host backend: it needs figures measured on a GPU\./);
    assert.doesNotMatch(text.out, /training:|inference:|preprocessing:/);
    if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it): the HTML page was written but not opened');
    const page = await inBrowser(html);
    assert.deepEqual(page.errors, []);
    assert.ok(page.canvases >= 2, `canvases: ${page.canvases}`);
    assert.equal(page.charts, page.canvases);
    assert.equal(page.drawn, page.charts, 'every chart has data and painted pixels');
    assert.match(page.text, /host backend/);
    assert.match(page.text, /No strategy on the host backend/);
    const h2d = report.bench.results.find((x) => x.test === 'copy' && x.direction === 'HtoD' && x.srcKind === 'pinned');
    assert.ok(page.text.includes(h2d!.medianGBps!.toFixed(2)), 'the table shows the measured figure');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gpumem bench --html writes a page with the copy chart, the cache sweep and the peer matrix', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-bench-'));
  const saved = process.env.GPUMEM_HOST_DEVICES;
  process.env.GPUMEM_HOST_DEVICES = '2';
  try {
    const html = join(dir, 'bench.html');
    const r = await run(['bench', '--backend', 'host', '--quick', '--max-size', '256KiB', '--only', 'copy', 'cache', 'peer', '--html', html]);
    assert.equal(r.code, 0, r.err);
    assert.ok(readFileSync(html, 'utf8').includes('new Chart('));
    const page = await inBrowser(html);
    assert.deepEqual(page.errors, []);
    // per device: copies host to device, device to host, device to device (split so that each chart's series have
    // colours of their own), and the cache sweep
    assert.equal(page.charts, 8, 'three copy charts and the cache chart for each of two devices');
    assert.equal(page.drawn, 8);
    const { value: look } = await inChromium<Array<{ title: string; series: number; colours: number; ticks: string[]; log: boolean }>>(
      html,
      `window.gpumemCharts.map((c) => ({
        title: c.options.plugins.title.text,
        series: c.data.datasets.length,
        colours: new Set(c.data.datasets.map((d) => d.borderColor + ' ' + d.pointStyle)).size,
        ticks: c.scales.x.ticks.map((t) => c.scales.x.getLabelForValue ? String(c.scales.x.options.ticks.callback(t.value)) : ''),
        log: c.scales.x.type === 'logarithmic',
      }))`,
    );
    for (const c of look) {
      assert.ok(c.series <= 10, `${c.title}: ${c.series} series`);
      assert.equal(c.colours, c.series, `${c.title}: every series has its own colour and point style`);
      assert.ok(c.log, `${c.title}: sizes on a log axis`);
      assert.ok(c.ticks.length >= 2, `${c.title}: ticks ${c.ticks.join(', ')}`);
      for (const t of c.ticks) assert.match(t, /^(1|2|4|8|16|32|64|128|256|512) (B|KiB|MiB|GiB)$/, `${c.title}: a tick at a power of two in bytes`);
    }
    assert.match(page.text, /peer access on \(GB\/s, one way/);
    assert.match(page.text, /Every row/);
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_HOST_DEVICES;
    else process.env.GPUMEM_HOST_DEVICES = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});
