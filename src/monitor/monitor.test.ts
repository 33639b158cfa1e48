/**
 * The monitor on the host backend: samples follow allocations and pools; the Prometheus text round-trips through an
 * independent parser; the HTTP server answers its routes and refuses what it should; the dashboard renders in
 * Chromium; `gpumem monitor` redraws in a real terminal (tmux) and stops on Ctrl-C.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { openRuntime, type Runtime } from '../memory/runtime.js';
import { CachingPool } from '../pool/caching-pool.js';
import { DeviceResource } from '../pool/sources.js';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';
import { MemoryMonitor, type MonitorSample } from './monitor.js';
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
        processes: [{ pid: 4242, name: 'python3', usedBytes: 10_737_418_240 }, { pid: 77 }],
      },
      { index: 1, totalBytes: 100, freeBytes: 100, usedBytes: 0, source: 'runtime', note: 'NVML (libnvidia-ml) not found' },
    ],
    pools: [
      {
        name: 'kv',
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
  const f = renderFrame(sample);
  assert.match(f, /gpumem monitor {2}gpu-node-7 {2}backend cuda/);
  assert.match(f, /^0 +NVIDIA H200 +10\.3 GiB +139\.8 GiB +129\.5 GiB +\[#+\.+\] 7\.4% +2 +nvml$/m);
  assert.match(f, /^1 +0 B +100 B +100 B .* 0\.0% +n\/a +runtime$/m);
  assert.match(f, /device 1: NVML \(libnvidia-ml\) not found/);
  assert.match(f, /^0 +4242 +python3 +10\.0 GiB$/m);
  assert.match(f, /^0 +77 +\? +n\/a$/m);
  assert.match(f, /^kv +1\.0 GiB +512\.0 MiB +512\.0 MiB +1\.0 GiB +0\.500 +3 +10 +2$/m);
  assert.doesNotMatch(f, /Ctrl-C/);
  assert.match(renderFrame(sample, { interactive: true }), /\(Ctrl-C to stop\)/);
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

test('gpumem monitor redraws in a terminal (tmux) and stops on Ctrl-C', { skip: TMUX ? false : 'tmux is not installed' }, async () => {
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
  tmux('new-session', '-d', '-s', session, '-x', '160', '-y', '40', `${process.execPath} ${cli} monitor --backend host --interval 0.2; sleep 30`);
  try {
    await until('the first frame', () => /\(Ctrl-C to stop\)/.test(capture()));
    const first = capture();
    assert.match(first, /^gpumem monitor .* backend host /m);
    assert.match(first, /^device +name +used +total +free +use +processes +source$/m);
    assert.equal(first.match(/^gpumem monitor /gm)?.length, 1, 'each frame replaces the last (the screen is cleared)');
    const stamp = /backend host {2}(\S+)/.exec(first)![1];
    await until('a redraw with a new time', () => /backend host {2}(\S+)/.exec(capture())?.[1] !== stamp);
    tmux('send-keys', '-t', session, 'C-c');
    // The monitor exits; the shell then runs `sleep 30`, so the pane lives on and shows the monitor is gone.
    await until('the monitor to stop', () => !/node/.test(tmux('display-message', '-p', '-t', session, '#{pane_current_command}')));
  } finally {
    if (alive()) tmux('kill-session', '-t', session);
  }
});
