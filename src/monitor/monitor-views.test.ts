/**
 * The monitor's views on the host backend: the terminal frame; the HTTP server answers its routes and refuses what it
 * should; the dashboard renders in Chromium; `gpumem monitor` prints JSON, Prometheus text and CSV, redraws in a real
 * terminal (tmux) and stops on q or when its reader goes away.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { CachingPool } from '../pool/caching-pool.js';
import { DeviceResource } from '../pool/sources.js';
import { main } from '../cli/program.js';
import { renderFrame } from '../render/monitor-terminal.js';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';
import { probe } from '../testing/http-probe.js';
import { parsePrometheus, twoDeviceHost as host, validSample } from '../testing/monitor-samples.js';
import { MemoryMonitor, type MonitorSample } from './monitor.js';
import { MonitorServer } from './server.js';

const MiB = 2 ** 20;

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

test('the server answers only its own names over loopback, marks every answer nosniff, and a scrape changes nothing', async () => {
  using rt = host();
  const monitor = new MemoryMonitor(rt);
  // A long interval: only the first sample at listen is the timer's; every other one would be a scrape's.
  await using server = new MonitorServer(monitor, { port: 0, intervalMs: 3_600_000, allowedHosts: [] });
  const { port } = await server.listen();
  const own = `127.0.0.1:${port}`;
  for (const path of ['/', '/metrics', '/api/sample', '/api/history']) {
    const rebound = await probe(port, path, `attacker.example:${port}`);
    assert.equal(rebound.status, 403, `${path} for a rebound name`);
    assert.doesNotMatch(rebound.body, /gpumem_|"devices"|hostname/, 'nothing of the machine in the refusal');
    const ok = await probe(port, path, own);
    assert.equal(ok.status, 200, path);
    assert.equal(ok.headers['x-content-type-options'], 'nosniff', path);
  }
  const taken = monitor.sampleCount;
  const history = JSON.stringify(monitor.history);
  for (let i = 0; i < 5; i++) {
    const scrape = await probe(port, '/metrics', `localhost:${port}`);
    assert.ok(parsePrometheus(scrape.body).some((f) => f.name === 'gpumem_device_memory_used_bytes'));
  }
  assert.equal(monitor.sampleCount, taken, 'five scrapes took no sample into the history');
  assert.equal(JSON.stringify(monitor.history), history, "the dashboard's history and the forecast's window are as they were");
  assert.equal((await probe(port, '/api/history', own)).body, history);
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
