/**
 * The monitor on the host backend: samples follow allocations and pools; the Prometheus text round-trips through an
 * independent parser; the HTTP server answers its routes and refuses what it should; the dashboard renders in
 * Chromium; `gpumem monitor` redraws in a real terminal (tmux) and stops on Ctrl-C.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { openRuntime, type Runtime } from '../runtime/runtime.js';
import { CachingPool } from '../pool/caching-pool.js';
import { DeviceResource } from '../pool/sources.js';
import { main } from '../cli/program.js';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';
import { DEFAULT_THRESHOLDS, growth, MemoryMonitor, stateOf, type MonitorSample } from './monitor.js';
import { toPrometheus } from './prometheus.js';
import { MONITOR_SAMPLE_SCHEMA } from './schema.js';
import { MonitorServer } from './server.js';
import { renderFrame } from '../render/monitor-terminal.js';

const require = createRequire(import.meta.url);
const parsePrometheus = require('parse-prometheus-text-format') as (
  text: string,
) => Array<{ name: string; help: string; type: string; metrics: Array<{ value: string; labels?: Record<string, string> }> }>;
const MiB = 2 ** 20;
const host = (): Runtime => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 30 } });
const ajv = new Ajv({ allErrors: true, strict: false });
const validSample = (s: unknown): void => assert.ok(ajv.validate(MONITOR_SAMPLE_SCHEMA, s), JSON.stringify(ajv.errors));

test('a sample follows device allocations and the pools handed to the monitor', () => {
  using rt = host();
  const pool = new CachingPool(new DeviceResource(rt.device(1)));
  const monitor = new MemoryMonitor(rt, { pools: { 'weights pool': pool }, historySize: 3 });
  const before = monitor.sample();
  validSample(before);
  assert.equal(before.backend, 'host');
  assert.deepEqual(
    before.devices.map((d) => d.index),
    [0, 1],
  );
  assert.equal(before.devices[0]!.totalBytes, 1 << 30);
  {
    using a = rt.device(0).alloc(64 * MiB);
    const address = pool.allocate(3 * MiB);
    const during = monitor.sample();
    validSample(during);
    const d0 = during.devices[0]!;
    assert.equal(d0.usedBytes - before.devices[0]!.usedBytes, a.bytes);
    assert.equal(d0.freeBytes, d0.totalBytes - d0.usedBytes);
    assert.equal(d0.source, 'host');
    const me = d0.processes?.find((p) => p.pid === process.pid);
    assert.ok(me, 'this process is listed');
    assert.equal(me.usedBytes, d0.usedBytes);
    if (process.platform === 'linux') assert.equal(me.name, 'node');
    const p = during.pools[0]!;
    const s = pool.stats();
    assert.equal(p.name, 'weights pool');
    assert.equal(p.requestedBytes, 3 * MiB);
    assert.equal(p.reservedBytes, s.reservedBytes.current);
    assert.equal(p.allocatedBytes, s.allocatedBytes.current);
    assert.ok(during.devices[1]!.usedBytes >= p.reservedBytes, "the pool's segments are device 1's memory");
    pool.deallocate(address, 3 * MiB);
  }
  const after = monitor.sample();
  assert.equal(after.devices[0]!.usedBytes, before.devices[0]!.usedBytes);
  monitor.sample();
  assert.equal(monitor.history.length, 3, 'the history keeps historySize samples');
  assert.equal(monitor.latest, monitor.history[2]);
  assert.equal(monitor.unwatchPool('weights pool'), true);
  assert.equal(monitor.sample().pools.length, 0);
  pool[Symbol.dispose]();
});

test('the monitor refuses devices it does not have, bad history sizes and things that are not pools', () => {
  using rt = host();
  assert.throws(() => new MemoryMonitor(rt, { devices: [2] }), InvalidArgumentError);
  assert.throws(() => new MemoryMonitor(rt, { devices: [-1] }), InvalidArgumentError);
  assert.throws(
    () => new MemoryMonitor(rt, { historySize: 0 }),
    (e: unknown) => e instanceof InvalidArgumentError && e.code === ErrorCode.INVALID_ARGUMENT,
  );
  assert.throws(() => new MemoryMonitor(rt, { historySize: 1.5 }), InvalidArgumentError);
  const m = new MemoryMonitor(rt, { devices: [1, 1] });
  assert.deepEqual(
    m.sample().devices.map((d) => d.index),
    [1],
    'a device asked for twice is sampled once',
  );
  assert.throws(() => m.watchPool('', new CachingPool(new DeviceResource(rt.device(0)))), InvalidArgumentError);
  assert.throws(() => m.watchPool('x', {} as never), InvalidArgumentError);
});

test('Prometheus text: every family has HELP and TYPE, values and escaped labels round-trip through a parser', () => {
  using rt = host();
  const pool = new CachingPool(new DeviceResource(rt.device(0)));
  const tricky = 'a "quoted" \\ back\nslash';
  const monitor = new MemoryMonitor(rt, { pools: { [tricky]: pool } });
  using a = rt.device(0).alloc(8 * MiB);
  pool.deallocate(pool.allocate(MiB), MiB);
  const sample = monitor.sample();
  const text = toPrometheus(sample);
  // The exposition grammar, line by line: comments, or name{labels} value.
  const sampleLine =
    /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*")*\})? (-?[0-9.e+]+|NaN|[+-]Inf)$/;
  const seen = new Set<string>();
  for (const line of text.trimEnd().split('\n')) {
    const m = /^# (HELP|TYPE) (\S+) (.+)$/.exec(line);
    if (m) {
      if (m[1] === 'TYPE') {
        assert.ok(['gauge', 'counter'].includes(m[3]!), line);
        if (m[3] === 'counter') assert.match(m[2]!, /_total$/, 'counters end in _total');
        seen.add(m[2]!);
      }
      continue;
    }
    assert.match(line, sampleLine);
    assert.ok(seen.has(line.split(/[{ ]/)[0]!), `TYPE comes before the samples of ${line}`);
  }
  const families = new Map(parsePrometheus(text).map((f) => [f.name, f]));
  const used = families.get('gpumem_device_memory_used_bytes')!;
  assert.equal(used.type, 'GAUGE');
  assert.equal(Number(used.metrics.find((x) => x.labels?.device === '0')!.value), sample.devices[0]!.usedBytes);
  assert.ok(sample.devices[0]!.usedBytes >= a.bytes);
  const reserved = families.get('gpumem_pool_reserved_bytes')!.metrics[0]!;
  assert.equal(reserved.labels?.pool, tricky, 'label escaping round-trips');
  assert.equal(Number(reserved.value), pool.stats().reservedBytes.current);
  assert.equal(Number(families.get('gpumem_pool_cache_misses_total')!.metrics[0]!.value), 1);
  assert.equal(families.get('gpumem_pool_cache_hits_total')!.type, 'COUNTER');
  const proc = families.get('gpumem_process_memory_used_bytes')!.metrics.find((x) => x.labels?.pid === String(process.pid));
  assert.ok(proc, 'this process has a series');
  pool[Symbol.dispose]();
});

test('the terminal frame shows devices, processes and pools', () => {
  const sample: MonitorSample = {
    schema: 'gpumem.monitor/1',
    time: '2026-11-30T12:00:00.000Z',
    host: 'gpu-node-7',
    backend: 'cuda',
    devices: [
      {
        index: 0,
        name: 'NVIDIA H200',
        totalBytes: 150_109_880_320,
        freeBytes: 139_000_000_000,
        usedBytes: 11_109_880_320,
        source: 'nvml',
        uuid: 'GPU-00000000-1111-2222-3333-444444444444',
        vendor: 'nvidia',
        utilizationPercent: 87,
        processes: [{ pid: 4242, name: 'python3', usedBytes: 10_737_418_240 }, { pid: 77 }],
        forecast: { growthBytesPerSecond: 100_000_000, timeToFullSeconds: 1390, state: 'ok' },
      },
      {
        index: 1,
        vendor: 'nvidia',
        totalBytes: 100,
        freeBytes: 100,
        usedBytes: 0,
        source: 'runtime',
        note: 'NVML (libnvidia-ml) not found',
        forecast: { state: 'ok' },
      },
    ],
    pools: [
      {
        name: 'kv',
        device: 0,
        forecast: { growthBytesPerSecond: 1e6, timeToFullSeconds: 139_000, state: 'ok' },
        reservedBytes: 2 ** 30,
        allocatedBytes: 2 ** 29,
        requestedBytes: 2 ** 29,
        peakReservedBytes: 2 ** 30,
        freeBytes: 2 ** 29,
        largestFreeBlockBytes: 2 ** 28,
        fragmentation: 0.5,
        segments: 3,
        cacheHits: 10,
        cacheMisses: 2,
      },
    ],
  };
  validSample(sample);
  const f = renderFrame(sample, { width: 200 });
  assert.match(f, /gpumem monitor {2}gpu-node-7 {2}backend cuda/);
  assert.match(f, /^0 +NVIDIA H200 +10\.3 GiB +139\.8 GiB +129\.5 GiB +\[#+\.+\] 7\.4% +87% +2 +23 min +ok +nvml$/m);
  assert.match(f, /^1 +0 B +100 B +100 B .* 0\.0% +n\/a +n\/a +- +ok +runtime$/m);
  assert.match(f, /device 1: NVML \(libnvidia-ml\) not found/);
  assert.match(f, /^0 +4242 +python3 +10\.0 GiB$/m);
  assert.match(f, /^0 +77 +\? +n\/a$/m);
  assert.match(f, /^kv +1\.0 GiB +512\.0 MiB +512\.0 MiB +1\.0 GiB +0\.500 +3 +10 +2 +38\.6 h +ok$/m);
  assert.doesNotMatch(f, /Ctrl-C/);
  assert.match(renderFrame(sample, { interactive: true, width: 200 }), /\(q or Ctrl-C to stop\)/);
  // In 80 columns nothing wraps: the least important columns give way (source, busy, free, processes), the rest stay.
  const narrow = renderFrame(sample, { width: 80 });
  assert.deepEqual(
    narrow.split('\n').filter((l) => l.length > 80),
    [],
  );
  assert.match(narrow, /^device +name +used +total +use +to OOM +state$/m);
  assert.match(narrow, /^0 +NVIDIA H200 +10\.3 GiB +139\.8 GiB +\[#?\.+\] 7\.4% +23 min +ok$/m);
  assert.match(narrow, /^pool +reserved +allocated +.*state$/m);
});

async function freePortTaken(): Promise<{ port: number; close: () => Promise<void> }> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((r) => s.close(() => r())) };
}

test('the server answers /, /metrics, /api/sample and /api/history, and refuses the rest', async () => {
  using rt = host();
  const monitor = new MemoryMonitor(rt);
  await using server = new MonitorServer(monitor, { port: 0, intervalMs: 100 });
  const { url, port } = await server.listen();
  assert.ok(port > 0);
  const page = await fetch(url);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type')!, /^text\/html/);
  assert.match(await page.text(), /<canvas id="usedChart">/);
  const metrics = await fetch(`${url}metrics`);
  assert.equal(metrics.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  assert.ok(parsePrometheus(await metrics.text()).some((f) => f.name === 'gpumem_device_memory_total_bytes'));
  const sample = (await (await fetch(`${url}api/sample`)).json()) as MonitorSample;
  validSample(sample);
  let history: MonitorSample[] = [];
  for (const t0 = Date.now(); history.length < 3 && Date.now() - t0 < 10_000; await new Promise((r) => setTimeout(r, 50))) {
    history = (await (await fetch(`${url}api/history`)).json()) as MonitorSample[];
  }
  assert.ok(history.length >= 3, `the timer samples every interval (history ${history.length})`);
  assert.ok(
    history.every((h, i) => i === 0 || h.time >= history[i - 1]!.time),
    'oldest first',
  );
  history.forEach(validSample);
  assert.equal((await fetch(`${url}nowhere`)).status, 404);
  const post = await fetch(`${url}metrics`, { method: 'POST', body: 'x' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
  const head = await fetch(`${url}metrics`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), '');
  await server.close();
  await server.close();
  await assert.rejects(fetch(`${url}metrics`));
});

test('the server refuses bad options and a port in use, with typed errors', async () => {
  using rt = host();
  const monitor = new MemoryMonitor(rt);
  assert.throws(() => new MonitorServer(monitor, { intervalMs: 10 }), InvalidArgumentError);
  assert.throws(() => new MonitorServer(monitor, { port: 70000 }), InvalidArgumentError);
  assert.throws(() => new MonitorServer(monitor, { port: 1.5 }), InvalidArgumentError);
  const taken = await freePortTaken();
  try {
    const server = new MonitorServer(monitor, { port: taken.port });
    await assert.rejects(server.listen(), (e: unknown) => e instanceof GpuError && e.code === ErrorCode.LISTEN_FAILED && /port is in use/.test(e.message));
    await server.close();
  } finally {
    await taken.close();
  }
});

test('the dashboard draws devices, the chart, processes and pools in Chromium', { skip: CHROMIUM ? false : 'chromium is not installed' }, async () => {
  using rt = host();
  const pool = new CachingPool(new DeviceResource(rt.device(0)));
  const address = pool.allocate(5 * MiB);
  const monitor = new MemoryMonitor(rt, { pools: { activations: pool } });
  await using server = new MonitorServer(monitor, { port: 0, intervalMs: 200 });
  const { url } = await server.listen();
  const { value, errors } = await inChromium<{ devices: number; text: string; chartPoints: number; status: string }>(
    url,
    `new Promise((resolve) => {
      const t0 = Date.now();
      const check = () => {
        const rows = document.querySelectorAll('#devices tr[data-device]');
        const chart = Chart.getChart('usedChart');
        const points = chart ? chart.data.labels.length : 0;
        if ((rows.length === 2 && points >= 3) || Date.now() - t0 > 8000) {
          resolve({ devices: rows.length, text: document.body.innerText, chartPoints: points, status: document.getElementById('status').textContent });
        } else setTimeout(check, 100);
      };
      check();
    })`,
  );
  assert.deepEqual(errors, []);
  assert.equal(value.devices, 2);
  assert.ok(value.chartPoints >= 3, `the chart grows as samples arrive (${value.chartPoints})`);
  assert.match(value.status, /^updated \d{4}-/);
  assert.match(value.text, /host CPU/);
  assert.match(value.text, /activations/);
  assert.match(value.text, new RegExp(`\\b${process.pid}\\b`), 'this process is in the process table');
  assert.match(value.text, /the CPU memory of this machine standing in for a GPU/, 'the host backend says what it shows');
  assert.match(value.text, /to OOM\s+state/, 'the device table has the forecast');
  assert.match(value.text, /\bok\b/);
  pool.deallocate(address, 5 * MiB);
  pool[Symbol.dispose]();
});

test('gpumem monitor --once --json prints one valid sample; bad options exit 2', async () => {
  const r = await runCli(['monitor', '--backend', 'host', '--once', '--json']);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trim().split('\n');
  assert.equal(lines.length, 1);
  validSample(JSON.parse(lines[0]!));
  const counted = await runCli(['monitor', '--backend', 'host', '--count', '3', '--interval', '0.1', '--prometheus']);
  assert.equal(counted.code, 0, counted.err);
  assert.equal(counted.out.match(/^# TYPE gpumem_device_memory_used_bytes gauge$/gm)?.length, 3);
  for (const bad of [
    ['--interval', '0'],
    ['--interval', 'soon'],
    ['--count', '0'],
    ['--port', '70000'],
    ['--device', '9', '--once'],
    ['--json', '--serve'],
  ]) {
    const b = await runCli(['monitor', '--backend', 'host', ...bad]);
    assert.equal(b.code, 2, `${bad.join(' ')}: ${b.err}`);
    assert.ok(b.err.length > 0);
  }
});

test('gpumem monitor --json stops quietly when its reader goes away (| head -1)', async () => {
  const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
  const child = spawn(process.execPath, [cli, 'monitor', '--backend', 'host', '--json', '--interval', '0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const first = await new Promise<string>((resolve) => child.stdout.once('data', (d: Buffer) => resolve(d.toString())));
  validSample(JSON.parse(first.split('\n')[0]!));
  child.stdout.destroy();
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  assert.equal(code, 0);
  assert.doesNotMatch(err, /EPIPE|Error/);
});

const TMUX = spawnSync('tmux', ['-V']).status === 0;

test('gpumem monitor redraws in an 80-column terminal (tmux) without wrapping and stops on q', { skip: TMUX ? false : 'tmux is not installed' }, async () => {
  const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
  const session = `gpumem-monitor-test-${process.pid}`;
  const tmux = (...args: string[]): string => execFileSync('tmux', args, { encoding: 'utf8' });
  const alive = (): boolean => spawnSync('tmux', ['has-session', '-t', session]).status === 0;
  const capture = (): string => tmux('capture-pane', '-p', '-t', session);
  const until = async (what: string, ok: () => boolean, ms = 10_000): Promise<void> => {
    const t0 = Date.now();
    while (!ok()) {
      if (Date.now() - t0 > ms) assert.fail(`${what} within ${ms} ms; screen:\n${alive() ? capture() : '(session ended)'}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  tmux('new-session', '-d', '-s', session, '-x', '80', '-y', '40', `${process.execPath} ${cli} monitor --backend host --interval 0.2; sleep 30`);
  try {
    await until('the first frame', () => /\(q or Ctrl-C to stop\)/.test(capture()));
    const first = capture();
    assert.match(first, /^gpumem monitor .* backend host /m);
    // an 80-column terminal: the table fits, no line wraps onto the next
    assert.match(first, /^device +name +used +total +use +to OOM +state$/m);
    assert.match(first, /^0 +\S.* +ok$/m);
    assert.equal(first.match(/^gpumem monitor /gm)?.length, 1, 'each frame replaces the last (the screen is cleared)');
    const stamp = /backend host {2}(\S+)/.exec(first)![1];
    await until('a redraw with a new time', () => /backend host {2}(\S+)/.exec(capture())?.[1] !== stamp);
    tmux('send-keys', '-t', session, 'q');
    // The monitor exits on q; the shell then runs `sleep 30`, so the pane lives on and shows the monitor is gone.
    await until('the monitor to stop', () => !/node/.test(tmux('display-message', '-p', '-t', session, '#{pane_current_command}')));
  } finally {
    if (alive()) tmux('kill-session', '-t', session);
  }
});

test('the Grafana dashboard imports as is: valid against the dashboard schema, every query names a metric the exporter emits', async () => {
  const { Ajv } = await import('ajv');
  const { GRAFANA_DASHBOARD_SCHEMA } = await import('./grafana-schema.js');
  const dashboard = JSON.parse(readFileSync(new URL('../../deploy/grafana/gpumem-dashboard.json', import.meta.url), 'utf8')) as {
    panels: Array<{ id: number; title: string; gridPos: { x: number; y: number; w: number; h: number }; targets: Array<{ expr: string; refId: string }> }>;
  };
  const ajv = new Ajv({ strict: false, allErrors: true });
  assert.ok(ajv.validate(GRAFANA_DASHBOARD_SCHEMA, dashboard), ajv.errorsText(ajv.errors));
  // panels fit the 24-column grid and do not overlap; ids and refIds are unique
  const cells = new Set<string>();
  for (const p of dashboard.panels) {
    assert.ok(p.gridPos.x + p.gridPos.w <= 24, `${p.title} fits the grid`);
    for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++)
      for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
        assert.ok(!cells.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`);
        cells.add(`${x},${y}`);
      }
    assert.equal(new Set(p.targets.map((t) => t.refId)).size, p.targets.length);
  }
  assert.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length);
  // what the exporter emits when every figure is there (a sample with utilisation, PCIe, processes and a growing pool)
  const full: MonitorSample = {
    schema: 'gpumem.monitor/1',
    time: '2026-12-01T08:00:00.000Z',
    host: 'node-1',
    backend: 'cuda',
    devices: [
      {
        index: 0,
        name: 'NVIDIA H200',
        uuid: 'GPU-1',
        vendor: 'nvidia',
        totalBytes: 100,
        freeBytes: 40,
        usedBytes: 60,
        reservedBytes: 1,
        source: 'nvml',
        utilizationPercent: 50,
        pcieTxBytesPerSecond: 1,
        pcieRxBytesPerSecond: 2,
        processes: [{ pid: 1, name: 'python3', usedBytes: 60 }],
        forecast: { growthBytesPerSecond: 1, timeToFullSeconds: 40, state: 'critical' },
      },
    ],
    pools: [
      {
        name: 'kv',
        device: 0,
        forecast: { growthBytesPerSecond: 1, timeToFullSeconds: 40, state: 'critical' },
        reservedBytes: 10,
        allocatedBytes: 5,
        requestedBytes: 5,
        peakReservedBytes: 10,
        freeBytes: 5,
        largestFreeBlockBytes: 5,
        fragmentation: 0,
        segments: 1,
        cacheHits: 1,
        cacheMisses: 1,
      },
    ],
  };
  validSample(full);
  const exported = new Set([...toPrometheus(full).matchAll(/^(gpumem_\w+)[{ ]/gm)].map((m) => m[1]!));
  for (const p of dashboard.panels)
    for (const t of p.targets) {
      const names = [...t.expr.matchAll(/\bgpumem_\w+/g)].map((m) => m[0]);
      assert.ok(names.length > 0, `${p.title}: the query names a gpumem metric`);
      for (const n of names) assert.ok(exported.has(n), `${p.title}: ${n} is a metric the exporter emits`);
      assert.match(t.expr, /hostname=~"\$hostname"/, `${p.title}: filtered by the node variable`);
    }
  // every series carries hostname; device and process series carry uuid and vendor
  for (const line of toPrometheus(full)
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))) {
    assert.match(line, /hostname="node-1"/, line);
    if (/^gpumem_(device_|process_)/.test(line) && !line.startsWith('gpumem_devices')) assert.match(line, /uuid="GPU-1",vendor="nvidia"/, line);
  }
});

test('time to out-of-memory: a growing pool on the host backend is forecast and marked by the thresholds', () => {
  // A clock the test moves: samples `step` seconds apart while the pool grows by 64 MiB each time, so the growth and
  // the time left are known exactly: 64 MiB per step, and the room left on the 1 GiB device divided by that rate.
  const forecastWith = (stepSeconds: number): MonitorSample => {
    using rt = host();
    let clock = Date.UTC(2026, 11, 1);
    const pool = new CachingPool(new DeviceResource(rt.device(0)), {});
    const monitor = new MemoryMonitor(rt, { thresholds: { windowSeconds: 3600 }, now: () => clock });
    monitor.watchPool('grow', pool);
    const held: number[] = [];
    let last: MonitorSample | undefined;
    for (let i = 0; i < 5; i++) {
      held.push(pool.allocate(64 * MiB));
      last = monitor.sample();
      clock += stepSeconds * 1000;
    }
    for (const a of held) pool.deallocate(a, 64 * MiB);
    pool[Symbol.dispose]();
    return last as MonitorSample;
  };
  const close = (a: number | undefined, b: number, what: string): void =>
    assert.ok(a !== undefined && Math.abs(a - b) <= 1e-9 * b, `${what}: ${a} against ${b}`);
  const fast = forecastWith(1);
  const p = fast.pools.find((x) => x.name === 'grow');
  const d = fast.devices[0];
  assert.ok(p && d);
  assert.equal(d.usedBytes, 5 * 64 * MiB, 'the device holds what the pool reserved');
  close(p.forecast.growthBytesPerSecond, 64 * MiB, 'pool growth');
  close(d.forecast.growthBytesPerSecond, 64 * MiB, 'device growth');
  close(d.forecast.timeToFullSeconds, d.freeBytes / (64 * MiB), 'device time left');
  assert.equal(d.forecast.state, 'critical', '11 s left is inside the 120 s critical time');
  assert.equal(p.forecast.state, 'critical');
  const slow = forecastWith(60).devices[0];
  close(slow?.forecast.timeToFullSeconds, (60 * (1024 - 320)) / 64, 'time left at 64 MiB a minute');
  assert.equal(slow?.forecast.state, 'warning', '660 s left is inside the 900 s warning time, outside the critical 120 s');
  // the state from its two causes, and growth from a least-squares fit
  assert.equal(stateOf(0.5, undefined, DEFAULT_THRESHOLDS), 'ok');
  assert.equal(stateOf(0.92, undefined, DEFAULT_THRESHOLDS), 'warning');
  assert.equal(stateOf(0.5, 600, DEFAULT_THRESHOLDS), 'warning');
  assert.equal(stateOf(0.98, undefined, DEFAULT_THRESHOLDS), 'critical');
  assert.equal(stateOf(0.1, 60, DEFAULT_THRESHOLDS), 'critical');
  assert.deepEqual(
    growth(
      [
        { t: 0, value: 0 },
        { t: 10, value: 100 },
        { t: 20, value: 200 },
      ],
      1000,
      60,
    ),
    { growthBytesPerSecond: 10, timeToFullSeconds: 100 },
  );
  assert.deepEqual(
    growth(
      [
        { t: 0, value: 5 },
        { t: 10, value: 5 },
        { t: 20, value: 5 },
      ],
      1000,
      60,
    ),
    { growthBytesPerSecond: 0 },
  );
  assert.deepEqual(
    growth(
      [
        { t: 0, value: 0 },
        { t: 10, value: 100 },
      ],
      1000,
      60,
    ),
    {},
    'two points are not a trend',
  );
  using rt = host();
  assert.throws(
    () => new MemoryMonitor(rt, { thresholds: { warningFraction: 0.99, criticalFraction: 0.9 } }),
    /thresholds must satisfy .*; got warning fraction 0\.99, critical fraction 0\.9, warning 900 s, critical 120 s, window 300 s$/,
  );
});

test('gpumem monitor --once --csv and --log write what they say', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-monitor-log-'));
  try {
    const log = join(dir, 'memory.ndjson');
    let out = '';
    const code = await main(['monitor', '--backend', 'host', '--count', '2', '--interval', '0.1', '--csv', '--log', log], {
      out: (s) => (out += s),
      err: () => {},
    });
    assert.equal(code, 0);
    const lines = out.trim().split('\n');
    assert.equal(
      lines[0],
      'time,hostname,backend,device,uuid,vendor,name,total_bytes,used_bytes,free_bytes,utilization_percent,processes,time_to_oom_seconds,state,source',
    );
    assert.equal(lines.length, 3, 'a header, then one row per device per sample');
    assert.match(lines[1]!, /,host,0,host-[^,]+-0,host,/);
    const samples = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as MonitorSample);
    assert.equal(samples.length, 2);
    for (const s of samples) validSample(s);
    const bad = await main(['monitor', '--backend', 'host', '--once', '--csv', '--json'], { out: () => {}, err: () => {} });
    assert.equal(bad, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('monitor thresholds are percentages: a fraction is refused with the percentage it meant, a conflict names both', async () => {
  const frac = await runCli(['monitor', '--backend', 'host', '--once', '--warn', '0.9']);
  assert.equal(frac.code, 2);
  assert.match(frac.err, /--warn takes a percentage: --warn 90 for 90%, not a fraction \("0\.9"\)/);
  const conflict = await runCli(['monitor', '--backend', 'host', '--once', '--warn', '99', '--critical', '90']);
  assert.equal(conflict.code, 2);
  assert.match(conflict.err, /--warn 99% is above --critical 90%/);
  assert.doesNotMatch(conflict.err, /[{}]/, 'no raw object in the message');
  const help = await runCli(['monitor', '--help']);
  assert.match(help.out, /--warn <percent> +mark a device warning from this percentage[^-]*\(default: 90\)/);
  assert.match(help.out, /\(default: 97\)/);
});
