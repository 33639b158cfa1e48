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
import fc from 'fast-check';
import { EventKind, readTrace, TraceEvents, type Trace } from '../formats/allocator-trace.js';
import { propertyParams } from '../testing/property.js';
import { sharedTest, sharedTrace } from '../testing/shared-traces.js';
import { EXPECTED, MiB, writeSnapshotFixture } from '../testing/snapshot-fixture.js';
import { recordedFacts, replay, stateAtStart } from './replay.js';

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

// Snapshots other projects published: pytorch-like and pytorch-expandable are the planner's allocator model
// (allocator-model/torch-caching.ts), not fitted to any of them. The first was recorded with expandable segments on.
for (const [file, expandable, reserved] of [
  ['code_location/memory_snapshot.pickle.json.gz', true, 8541700096],
  ['EoR_NN/snapshot.pickle.json.gz', false, 134217728],
] as const)
  sharedTest(`${file}: PyTorch's allocator with the recording's setting reserves what the recording reserved`, {}, async () => {
    const r = replay(await readTrace(sharedTrace(file)));
    assert.equal(r.trace.expandableSegments, expandable);
    assert.equal(r.trace.peakReservedBytes, reserved);
    const same = r.configurations.find((c) => c.name === (expandable ? 'pytorch-expandable' : 'pytorch-like'))!;
    assert.equal(same.peakReservedBytes, reserved);
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
  // the log's three requests, all live at the end; a request log says nothing of the recorder's segments, and the
  // JSON leaves those figures out rather than print a zero
  assert.equal(j.trace.peakRequestedBytes, 1024 + 2048 + 4194304);
  assert.ok(!('peakReservedBytes' in j.trace), 'no recorded peak reserved');
  assert.ok(!('segmentAllocs' in j.trace), 'no recorded segment allocations');
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

test('an expandable-segments snapshot of three GPUs replays each GPU from nothing live, reserved memory being its mapped ranges', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-expandable-'));
  try {
    const files = writeSnapshotFixture(dir);
    for (const file of [files.pickle, files.json]) {
      for (const device of [0, 1, 2] as const) {
        const r = replay(await readTrace(file, { device }));
        assert.equal(r.trace.device, device);
        assert.deepEqual(r.trace.devices, [0, 1, 2]);
        assert.equal(r.trace.startedMidRun, undefined, `${file} GPU ${device}: nothing was live before the first event`);
        assert.equal(r.trace.peakReservedBytes, EXPECTED.peakReserved[device], `${file} GPU ${device}: peak reserved`);
        assert.equal(r.trace.peakRequestedBytes, EXPECTED.peakRequested[device], `${file} GPU ${device}: peak requested`);
        assert.equal(r.trace.expandableSegments, true);
        assert.equal(r.trace.untrackedFrees, 0);
        for (const c of r.configurations) assert.ok(c.minDeviceBytes >= EXPECTED.peakRequested[device], c.name);
      }
    }
    const out: string[] = [];
    assert.equal(await main(['pool', 'replay', files.pickle, '--device', '1'], { out: (x) => out.push(x), err: () => {} }), 0);
    assert.match(out.join(''), /GPUs 0, 1, 2; this is GPU 1 alone/);
    assert.match(out.join(''), /expandable segments on/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * Pages of one expandable segment mapped and unmapped at random, some mapped before recording began: undoing the
 * trace from the snapshot's mapped ranges must find exactly the pages mapped before, and the peak it reports must
 * be the most ever mapped at once.
 */
test('undoing map and unmap events from the end state finds what was mapped before recording, for any order of them', () => {
  const PAGE = 2 * MiB;
  const BASE = 0x7f0000000000;
  const op = fc.record({ map: fc.boolean(), page: fc.nat(63), len: fc.integer({ min: 1, max: 16 }) });
  fc.assert(
    fc.property(fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }), fc.array(op, { maxLength: 60 }), (before, ops) => {
      const mapped = [...before];
      const events = new TraceEvents();
      let now = mapped.filter(Boolean).length;
      let peak = now;
      for (const o of ops) {
        if (mapped[o.page] === o.map) continue;
        let n = 0;
        while (n < o.len && o.page + n < 64 && mapped[o.page + n] !== o.map) mapped[o.page + n++] = o.map;
        events.push(o.map ? EventKind.SegmentMap : EventKind.SegmentUnmap, BASE + o.page * PAGE, n * PAGE, 0);
        now += o.map ? n : -n;
        peak = Math.max(peak, now);
      }
      // the snapshot lists each contiguous mapped range as a segment
      const segments: Array<{ address: number; size: number; stream: number }> = [];
      for (let p = 0; p < 64; p++) {
        if (!mapped[p]) continue;
        const last = segments[segments.length - 1];
        if (last && last.address + last.size === BASE + p * PAGE) last.size += PAGE;
        else segments.push({ address: BASE + p * PAGE, size: PAGE, stream: 0 });
      }
      events.push(EventKind.Alloc, BASE, 512, 0);
      const trace: Trace = {
        file: 'x',
        format: 'pytorch',
        devices: [0],
        device: 0,
        events,
        hasFreeCompleted: true,
        atEnd: { segments, blocks: [{ address: BASE, size: 512, stream: 0 }] },
      };
      const start = stateAtStart(trace);
      const beforeBytes = before.filter(Boolean).length * PAGE;
      assert.equal(
        start.segments.reduce((s, x) => s + x.size, 0),
        beforeBytes,
      );
      for (const x of start.segments) for (let a = x.address; a < x.address + x.size; a += PAGE) assert.ok(before[(a - BASE) / PAGE], 'a page mapped before');
      const facts = recordedFacts(trace, start);
      assert.equal(facts.peakReservedBytes, peak * PAGE);
      assert.equal(facts.startedMidRun?.reservedBytes, beforeBytes > 0 ? beforeBytes : undefined);
    }),
    propertyParams(300),
  );
});
