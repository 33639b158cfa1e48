/** Replays of recorded traces: PyTorch snapshots recorded on an H200, gpumem's own log, RMM's CSV, and bad files. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BadInputError } from '../errors.js';
import { main } from '../cli/program.js';
import { LoggingAdaptor } from '../pool/adaptors.js';
import { CachingPool } from '../pool/caching-pool.js';
import { SimulatedResource } from '../pool/sources.js';
import { readTrace } from '../formats/allocator-trace.js';
import { replay } from './replay.js';

const fixture = (name: string): string => new URL(`../../fixtures/${name}`, import.meta.url).pathname;

test('the PyTorch-like configuration reproduces what PyTorch itself reserved (GPT-2 training, H200)', async () => {
  const trace = await readTrace(fixture('snapshots/gpt2-train.snapshot.json.gz'));
  const r = replay(trace);
  assert.equal(r.trace.format, 'pytorch');
  assert.equal(r.trace.allocations, 6165);
  assert.equal(r.trace.segmentAllocs, 138);
  // torch.cuda.max_memory_reserved() printed 8803844096 when the trace was recorded.
  assert.equal(r.trace.peakReservedBytes, 8803844096);
  const pt = r.configurations.find((c) => c.name === 'pytorch-like')!;
  assert.equal(pt.peakReservedBytes, 8803844096);
  assert.equal(pt.segmentAllocs, 138);
});

for (const name of ['gpt2-train', 'llama-mini-train']) {
  test(`${name}: the growable configuration reserves at most 1.02 x its peak allocated, with fewer segment allocations than PyTorch made`, async () => {
    const trace = await readTrace(fixture(`snapshots/${name}.snapshot.json.gz`));
    const r = replay(trace);
    const g = r.configurations.find((c) => c.name === 'gpumem-growable')!;
    assert.ok(g.peakReservedBytes <= 1.02 * g.peakAllocatedBytes, `${g.peakReservedBytes} / ${g.peakAllocatedBytes}`);
    assert.ok(g.segmentAllocs < r.trace.segmentAllocs!, `${g.segmentAllocs} < ${r.trace.segmentAllocs}`);
    for (const c of r.configurations) {
      assert.ok(c.peakAllocatedBytes >= c.peakRequestedBytes);
      assert.ok(c.peakReservedBytes >= c.peakAllocatedBytes);
      assert.ok(c.minDeviceBytes >= c.peakAllocatedBytes && c.minDeviceBytes <= c.peakReservedBytes + 2 ** 21, c.name);
      assert.ok(c.fragmentationAtPeak >= 0 && c.fragmentationAtPeak <= 1);
    }
  });
}

test("gpumem's own log (written by LoggingAdaptor) and RMM's CSV replay", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-replay-'));
  try {
    const file = join(dir, 'trace.ndjson');
    {
      using log = new LoggingAdaptor(new CachingPool(new SimulatedResource()), file);
      const live: Array<[number, number]> = [];
      for (let i = 0; i < 200; i++) {
        const size = ((i * 7919) % 5000) * 1024 + 100;
        live.push([log.allocate(size, { stream: i % 2 }), size]);
        if (i % 3 === 2) {
          const [a, s] = live.splice(i % live.length, 1)[0]!;
          log.deallocate(a, s);
        }
      }
    }
    const r = replay(await readTrace(file));
    assert.equal(r.trace.format, 'gpumem');
    assert.equal(r.trace.allocations, 200);
    assert.equal(r.trace.streams, 2);
    assert.equal(r.trace.peakReservedBytes, undefined, "a request log says nothing about the recorder's segments");
    const csv = replay(await readTrace(fixture('pool/rmm-log.csv')));
    assert.equal(csv.trace.format, 'rmm');
    assert.equal(csv.trace.allocations, 4);
    assert.equal(csv.trace.peakRequestedBytes, 1024 + 2048 + 4194304);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad traces are refused with the file named, and the CLI exits 2', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-bad-'));
  try {
    const cases: Record<string, string | Buffer> = {
      'empty.json': '',
      'text.txt': 'hello world\n',
      'truncated.json.gz': gzipSync(Buffer.from('{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size"')).subarray(0, 40),
      'no-traces.json': '{"segments": []}',
      'deep.json': '{"device_traces": ' + '['.repeat(100000) + ']'.repeat(100000) + '}',
      'wrong-types.json': '{"device_traces": [[{"action": "alloc", "addr": "x", "size": 10}]]}',
      'huge-number.json': '{"device_traces": [[{"action": "alloc", "addr": 1e400, "size": 10}]]}',
      'bad.ndjson': '{"t": 1, "action": "allocate", "address": 1, "bytes": 10}\nnot json\n',
      'bad.csv': 'Thread,Time,Action,Pointer,Size,Stream\n1,2,explode,0x1,10,0\n',
      'no-allocs.json': '{"device_traces": [[]]}',
    };
    for (const [name, body] of Object.entries(cases)) {
      const file = join(dir, name);
      writeFileSync(file, body);
      await assert.rejects(readTrace(file), (e: unknown) => e instanceof BadInputError && e.message.includes(file), name);
      const err: string[] = [];
      const code = await main(['pool', 'replay', file], { out: () => {}, err: (s) => err.push(s) });
      assert.equal(code, 2, `${name}: exit code`);
      assert.match(err.join(''), new RegExp(name.replace('.', '\\.')));
    }
    assert.equal(await main(['pool', 'replay', join(dir, 'missing.json')], { out: () => {}, err: () => {} }), 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gpumem pool replay --json prints the documented shape', async () => {
  const out: string[] = [];
  const code = await main(['pool', 'replay', fixture('pool/rmm-log.csv'), '--json', '--config', 'gpumem', 'gpumem-growable'], {
    out: (s) => out.push(s),
    err: () => {},
  });
  assert.equal(code, 0);
  const j = JSON.parse(out.join('')) as { trace: Record<string, unknown>; configurations: Array<Record<string, unknown>> };
  for (const k of ['peakRequestedBytes', 'peakReservedBytes', 'segmentAllocs'])
    assert.ok(k in j.trace || k === 'peakReservedBytes' || k === 'segmentAllocs', k);
  assert.deepEqual(
    j.configurations.map((c) => c.name),
    ['gpumem', 'gpumem-growable'],
  );
  for (const c of j.configurations) {
    for (const k of ['name', 'peakRequestedBytes', 'peakAllocatedBytes', 'peakReservedBytes', 'segmentAllocs', 'fragmentationAtPeak', 'minDeviceBytes'])
      assert.ok(k in c, k);
  }
  assert.equal(await main(['pool', 'replay', fixture('pool/rmm-log.csv'), '--config', 'nope'], { out: () => {}, err: () => {} }), 2);
});

test('a snapshot recorded mid-run starts from the blocks and segments live before its first event', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-midrun-'));
  try {
    const MiB = 2 ** 20;
    // before recording: a 20 MiB segment holding a 12 MiB block (freed during the recording) and an 8 MiB block
    // (still live at the end); during it: a new 2 MiB segment with a 1 MiB allocation, never freed
    const snapshot = {
      segments: [
        {
          device: 0,
          address: 0x1000000,
          total_size: 20 * MiB,
          stream: 0,
          blocks: [
            { address: 0x1000000, size: 12 * MiB, state: 'inactive' },
            { address: 0x1000000 + 12 * MiB, size: 8 * MiB, state: 'active_allocated' },
          ],
        },
        { device: 0, address: 0x9000000, total_size: 2 * MiB, stream: 0, blocks: [{ address: 0x9000000, size: MiB, state: 'active_allocated' }] },
      ],
      device_traces: [
        [
          { action: 'free_requested', addr: 0x1000000, size: 12 * MiB, stream: 0 },
          { action: 'free_completed', addr: 0x1000000, size: 12 * MiB, stream: 0 },
          { action: 'segment_alloc', addr: 0x9000000, size: 2 * MiB, stream: 0 },
          { action: 'alloc', addr: 0x9000000, size: MiB, stream: 0 },
        ],
      ],
    };
    const file = join(dir, 'midrun.json');
    writeFileSync(file, JSON.stringify(snapshot));
    const r = replay(await readTrace(file));
    assert.deepEqual(r.trace.startedMidRun, { blocks: 2, bytes: 20 * MiB, segments: 1, reservedBytes: 20 * MiB });
    assert.equal(r.trace.untrackedFrees, 0);
    assert.equal(r.trace.peakRequestedBytes, 20 * MiB, 'held at the start, before the 12 MiB block was freed');
    assert.equal(r.trace.peakReservedBytes, 22 * MiB);
    for (const c of r.configurations) assert.ok(c.minDeviceBytes >= 20 * MiB, `${c.name}: ${c.minDeviceBytes}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
