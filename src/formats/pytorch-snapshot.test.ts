/** Reading PyTorch memory snapshots: pickle and JSON alike, every device, and files that are not snapshots refused from their first bytes. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sharedTest, sharedTrace } from '../testing/shared-traces.js';
import { gzipSync } from 'node:zlib';
import { BadInputError } from '../errors.js';
import { UnsafePickleError } from '../input/pickle.js';
import { Raw, writePickle } from '../testing/pickle-writer.js';
import { BASE, EXPECTED, FRAMES, MiB, writeSnapshotFixture } from '../testing/snapshot-fixture.js';
import { detectFormat, EventKind, readTrace } from './allocator-trace.js';
import { expandableSegmentsOn, readPytorchSnapshot, type PytorchSnapshot } from './pytorch-snapshot.js';

const withDir = async (fn: (dir: string) => Promise<void>): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-snap-'));
  try {
    await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

/** What a test compares of two readings: every column of every device's events, and the segments. */
const shape = (s: PytorchSnapshot): unknown =>
  s.devices.map((d) => ({
    device: d.device,
    events: [...Array(d.events.length).keys()].map((i) => [
      d.events.kind[i],
      d.events.addr[i],
      d.events.size[i],
      d.events.stream[i],
      d.events.time[i],
      d.events.stack[i],
    ]),
    segments: d.segments,
  }));

test('the pickle _dump_snapshot writes and the JSON of the same snapshot read alike, for every device, in protocols 2 to 5', async () => {
  await withDir(async (dir) => {
    const { json } = writeSnapshotFixture(dir);
    const fromJson = await readPytorchSnapshot(json, { stacks: true });
    assert.equal(fromJson.encoding, 'json');
    assert.deepEqual(
      fromJson.devices.map((d) => d.device),
      [0, 1, 2],
    );
    // the snapshot marker is no memory event; the others are kept in order
    assert.deepEqual(
      fromJson.devices.map((d) => d.events.count(EventKind.Alloc)),
      [...EXPECTED.allocs],
    );
    assert.equal(fromJson.hasTimes, true);
    assert.equal(fromJson.hasFreeCompleted, true);
    assert.equal(expandableSegmentsOn(fromJson), true);
    assert.deepEqual(fromJson.stacks[fromJson.devices[0]!.events.stack[1]!], FRAMES.embed);
    for (const protocol of [2, 3, 4, 5] as const) {
      const { pickle } = writeSnapshotFixture(dir, { protocol });
      const fromPickle = await readPytorchSnapshot(pickle, { stacks: true });
      assert.equal(fromPickle.encoding, 'pickle');
      assert.deepEqual(shape(fromPickle), shape(fromJson), `protocol ${protocol}`);
      assert.deepEqual(fromPickle.stacks, fromJson.stacks);
      assert.equal(JSON.stringify(fromPickle.allocatorSettings), JSON.stringify(fromJson.allocatorSettings));
    }
    // gzip is recognised by its bytes, not its name
    const gz = join(dir, 'snapshot.bin');
    writeFileSync(gz, gzipSync(writePickle({ device_traces: [[{ action: 'alloc', addr: 4096, size: 512, stream: 0 }]] })));
    const t = await readTrace(gz);
    assert.equal(t.events.length, 1);
    assert.equal(t.hasTimes, false);
  });
});

test('one device of three is replayed, by choice; a device with no events is refused naming those that have some', async () => {
  await withDir(async (dir) => {
    const { pickle } = writeSnapshotFixture(dir);
    const t1 = await readTrace(pickle, { device: 1 });
    assert.equal(t1.device, 1);
    assert.deepEqual(t1.devices, [0, 1, 2]);
    assert.equal(t1.atEnd?.segments[0]?.address, BASE[1]);
    await assert.rejects(readTrace(pickle, { device: 5 }), (e: unknown) => e instanceof BadInputError && /device 5.*0, 1, 2/.test(e.message));
  });
});

test('a file that is not a snapshot is refused from its first bytes, naming what it is, before the rest is read', async () => {
  await withDir(async (dir) => {
    const cases: Array<[string, Buffer | string, RegExp]> = [
      // the rest of each file is not valid at all: a reader that went on would fail on it with another message
      ['kineto.json', `{"schemaVersion": 1, "traceEvents": [${'x'.repeat(100000)}`, /profiler trace/],
      ['rocprof.json', '{"rocprofiler-sdk-tool": [{"x"', /rocprofv3/],
      ['other.json', `{"model": ${'!'.repeat(1000)}`, /first key is "model"/],
      ['rows.json', '[[1, "alloc", 10]]', /JSON array/],
      ['state-dict.pickle', Buffer.from([0x80, 4, 0x63, ...Buffer.from('collections\nOrderedDict\n'), 0xff, 0xff]), /pickle of collections\.OrderedDict/],
      ['dict.pickle', Buffer.concat([writePickle({ weights: [1] }).subarray(0, 30), Buffer.from([0xff])]), /first key is "weights"/],
      ['binary.bin', Buffer.from([0, 1, 2, 3, 0, 0, 7]), /binary file/],
    ];
    for (const [name, body, why] of cases) {
      const file = join(dir, name);
      writeFileSync(file, body);
      await assert.rejects(detectFormat(file), (e: unknown) => e instanceof BadInputError && why.test(e.message) && e.message.includes(file), name);
    }
  });
});

test('a snapshot pickle that names a class anywhere is refused as unsafe, and nothing of it is used', async () => {
  await withDir(async (dir) => {
    const file = join(dir, 'evil.pickle');
    // a real snapshot's first key, then a frame that is an object of a class
    writeFileSync(
      file,
      writePickle({
        segments: [],
        device_traces: [[{ action: 'alloc', addr: 1, size: 2, stream: 0, frames: new Raw(Buffer.from('cos\nsystem\n', 'latin1')) }]],
      }),
    );
    await assert.rejects(readTrace(file), (e: unknown) => e instanceof UnsafePickleError && e.global === 'os.system');
  });
});

const shared = sharedTrace('cs336-a2-systems/memory_files/memory_ctx128_forward.pickle.json.gz');
let python = false;
try {
  execFileSync('python3', ['-c', 'import pickle, gzip, json'], { stdio: 'ignore' });
  python = true;
} catch {
  python = false;
}

sharedTest(
  'a snapshot recorded on a GPU (cs336-a2-systems, shared), pickled by CPython as _dump_snapshot does, reads as its JSON does',
  {
    skip: !python ? 'python3 is not installed' : false,
  },
  async () => {
    await withDir(async (dir) => {
      const pickle = join(dir, 'snapshot.pickle');
      execFileSync('python3', [
        '-c',
        'import gzip, json, pickle, sys; pickle.dump(json.load(gzip.open(sys.argv[1])), open(sys.argv[2], "wb"))',
        shared,
        pickle,
      ]);
      const a = await readPytorchSnapshot(shared, { stacks: true });
      const b = await readPytorchSnapshot(pickle, { stacks: true });
      assert.equal(b.encoding, 'pickle');
      assert.ok(a.devices[0]!.events.length > 1000, 'a real recording');
      assert.deepEqual(shape(b), shape(a));
      assert.deepEqual(b.stacks, a.stacks);
      assert.equal(b.allocatorSettings?.expandable_segments, false);
      assert.ok(b.stacks.length > 0 && b.stacks.every((s) => s.length > 0));
    });
  },
);

test('expandable segments: reserved memory is the mapped ranges, and gpumem snapshots count mapped_size, not the virtual range', async () => {
  await withDir(async (dir) => {
    const file = join(dir, 'gpumem.json');
    writeFileSync(
      file,
      JSON.stringify({
        segments: [{ device: 0, address: 1 << 30, total_size: 64 * 2 ** 30, mapped_size: 4 * MiB, stream: 0, is_expandable: true, blocks: [] }],
        device_traces: [[{ action: 'alloc', addr: 1 << 30, size: MiB, stream: 0 }]],
        allocator: 'gpumem',
      }),
    );
    const t = await readTrace(file);
    assert.deepEqual(
      t.atEnd?.segments.map((s) => s.size),
      [4 * MiB],
    );
    assert.equal(t.expandableSegments, true);
  });
});
