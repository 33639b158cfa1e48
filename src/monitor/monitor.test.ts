/**
 * The monitor as a library on the host backend: samples follow allocations and pools; the Prometheus text round-trips
 * through an independent parser; the Grafana dashboard queries what the exporter emits; growth is forecast into a time
 * to out-of-memory. The views (terminal, server, dashboard, CLI) are tested in monitor-views.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import { CachingPool } from '../pool/caching-pool.js';
import { DeviceResource } from '../pool/sources.js';
import { parsePrometheus, twoDeviceHost as host, validSample } from '../testing/monitor-samples.js';
import { DEFAULT_THRESHOLDS, growth, MemoryMonitor, stateOf, type MonitorSample } from './monitor.js';
import { toPrometheus } from './prometheus.js';

const MiB = 2 ** 20;

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
