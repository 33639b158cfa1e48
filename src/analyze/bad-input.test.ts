/**
 * Hostile and broken input for gpumem analyze: every case ends in a BadInputError that names the file (exit code 2
 * from the CLI), never a crash, a hang or unbounded memory. Then fast-check mutates real traces of every format.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { BadInputError } from '../errors.js';
import { loadTraces } from './analyze.js';
import { runCli } from '../testing/harness.js';
import { openSqlite } from '../input/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-analyze-bad-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (p: string): string => new URL(`../../fixtures/${p}`, import.meta.url).pathname;
let n = 0;
const file = (name: string, content: string | Buffer): string => {
  const p = join(dir, `${n++}-${name}`);
  writeFileSync(p, content);
  return p;
};

/** Loading `path` must fail with a BadInputError naming it, whose message matches `why`. */
async function refused(path: string, why: RegExp): Promise<void> {
  await assert.rejects(loadTraces([path]), (e: unknown) => {
    assert.ok(e instanceof BadInputError, `a BadInputError, not ${String(e)}`);
    assert.ok(e.message.includes(path), `names the file: ${e.message}`);
    assert.match(e.message, why);
    return true;
  });
}

const event = (o: Record<string, unknown>): string =>
  JSON.stringify({
    traceEvents: [{ ph: 'X', cat: 'gpu_memcpy', name: 'Memcpy HtoD (Pageable -> Device)', ts: 1, dur: 2, args: { bytes: 4, stream: 7 }, ...o }],
  });

test('empty, missing, truncated, wrong-format and binary files are refused with the file named', async () => {
  await refused(file('empty.json', ''), /empty/);
  await refused(join(dir, 'does-not-exist.json'), /cannot read/);
  const gz = readFileSync(fixture('traces/pytorch-cuda-tuned.pt.trace.json.gz'));
  await refused(file('cut.json.gz', gz.subarray(0, gz.length >> 1)), /truncated|corrupt|unexpected end/i);
  await refused(file('cut.json', gunzipSync(gz).subarray(0, 5000)), /truncated|ends in the middle/i);
  await refused(
    file('image.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52])),
    /binary file|not a trace/,
  );
  await refused(file('notes.txt', 'hello, world\nthis is not a trace\n'), /not a trace gpumem reads/);
  await refused(file('other.json', '{"a": 1}'), /a JSON object with keys a, not a trace/);
  await refused(file('report1.nsys-rep', 'x'), /nsys export --type sqlite/);
  await refused(file('fake.sqlite', `SQLite format 3\0${'x'.repeat(200)}`), /not a database|not an Nsight/);
});

test('deep nesting, huge numbers and wrong types are refused, not crashed on', async () => {
  await refused(file('deep.json', `{"metadata":${'['.repeat(100_000)}`), /nesting deeper than 256/);
  await refused(file('deep-events.json', `{"traceEvents":${'['.repeat(100_000)}`), /nested deeper than 32/);
  await refused(file('deep-event.json', `{"traceEvents":[{"args":${'{"a":'.repeat(1000)}1${'}'.repeat(1000)}}]}`), /nested deeper/);
  await refused(file('huge.json', event({ ts: 'HUGE' }).replace('"HUGE"', '1e400')), /ts is not a valid number/);
  await refused(file('long-number.json', event({ ts: 'HUGE' }).replace('"HUGE"', '9'.repeat(100_000))), /ts is not a valid number/);
  await refused(file('negative.json', event({ dur: -5 })), /dur is negative \(-5\)/);
  await refused(file('string-ts.json', event({ ts: 'yesterday' })), /ts is not a valid number/);
  await refused(file('array-bytes.json', event({ args: { bytes: [4] } })), /bytes should be a number/);
  await refused(file('events-not-objects.json', JSON.stringify({ traceEvents: new Array(1500).fill(7) })), /not an event object/);
  await refused(file('bad-snapshot.json', JSON.stringify({ segments: [{ total_size: 'lots', blocks: [] }] })), /total_size is not a valid number/);
  await refused(
    file(
      'copy.csv',
      '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",1,0,1,1,abc,5\n',
    ),
    /Start_Timestamp is not a valid number/,
  );
  const sqlite = join(dir, 'hostile.sqlite');
  const db = openSqlite(sqlite, { write: true });
  db.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start, end, bytes, copyKind); INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1, 2, 'many', 1)");
  db.close();
  await refused(sqlite, /column bytes holds "many", not an integer/);
});

test('a gigabyte-style single line costs bounded memory: a CSV record over 1 MiB is refused, a huge JSON string is cut', async () => {
  // 64 MiB without a line break after a valid rocprofv3 header
  const csv = join(dir, 'one-line.csv');
  const fd = openSync(csv, 'w');
  writeSync(fd, '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n');
  const chunk = Buffer.alloc(1 << 20, 'a');
  for (let i = 0; i < 64; i++) writeSync(fd, chunk);
  closeSync(fd);
  await refused(csv, /not valid CSV|record/i);
  // a 64 MiB kernel name inside a valid trace: kept cut to 64 KiB, the trace still analysed
  const big = join(dir, 'long-name.json');
  const fj = openSync(big, 'w');
  writeSync(fj, '{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"stream":7},"name":"');
  for (let i = 0; i < 64; i++) writeSync(fj, chunk);
  writeSync(fj, '"}]}');
  closeSync(fj);
  // one event of 80 MiB of keys and values is refused rather than held
  const wide = join(dir, 'wide-event.json');
  const fw = openSync(wide, 'w');
  writeSync(fw, '{"traceEvents":[{"ph":"X","args":{');
  const entries = Buffer.from(Array.from({ length: 20000 }, (_, i) => `"k${i}":"${'v'.repeat(40)}",`).join(''));
  for (let i = 0; i < 80 * 2 ** 20; i += entries.length) writeSync(fw, entries);
  writeSync(fw, '"end":1}}]}');
  closeSync(fw);
  await refused(wide, /holds more than \d+ characters/);
  const before = process.memoryUsage().rss;
  const model = await loadTraces([big]);
  assert.equal(model.kernels.length, 1);
  assert.ok([...model.kernelNames.keys()][0]!.length <= 65536 + 220);
  assert.ok(process.memoryUsage().rss - before < 512 * 2 ** 20, 'did not hold the 64 MiB string several times over');
});

test('the CLI exits 2 on bad input and names the file', async () => {
  const bad = file('bad.json', '{"traceEvents": [');
  const r = await runCli(['analyze', bad]);
  assert.equal(r.code, 2);
  assert.ok(r.err.includes(bad), r.err);
  const unknown = await runCli(['analyze', fixture('traces/pytorch-cuda-tuned.pt.trace.json.gz'), '--format', 'perfetto']);
  assert.equal(unknown.code, 2);
  const noFiles = await runCli(['analyze']);
  assert.equal(noFiles.code, 2);
});

/** Mutations of a byte string: truncate, flip a byte, insert or delete a run, duplicate a slice. */
const mutation = (len: number): fc.Arbitrary<(b: Buffer) => Buffer> =>
  fc.oneof(
    fc.integer({ min: 0, max: len }).map((k) => (b: Buffer) => b.subarray(0, k)),
    fc.tuple(fc.integer({ min: 0, max: len - 1 }), fc.integer({ min: 0, max: 255 })).map(([k, v]) => (b: Buffer) => {
      const c = Buffer.from(b);
      c[k] = v;
      return c;
    }),
    fc.tuple(fc.integer({ min: 0, max: len }), fc.constantFrom('{', '[', '"', ',', '\n', '-1e999', 'null', '"x"', '\0', ']]]}', '9'.repeat(40))).map(
      ([k, s]) =>
        (b: Buffer) =>
          Buffer.concat([b.subarray(0, k), Buffer.from(s), b.subarray(k)]),
    ),
    fc.tuple(fc.integer({ min: 0, max: len }), fc.integer({ min: 1, max: 200 })).map(
      ([k, d]) =>
        (b: Buffer) =>
          Buffer.concat([b.subarray(0, k), b.subarray(k + d)]),
    ),
    fc.tuple(fc.integer({ min: 0, max: len }), fc.integer({ min: 1, max: 500 })).map(
      ([k, d]) =>
        (b: Buffer) =>
          Buffer.concat([b.subarray(0, k + d), b.subarray(k)]),
    ),
  );

async function fuzz(name: string, original: Buffer, runs: number, wrap: (b: Buffer) => Buffer = (b) => b): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(mutation(original.length), { minLength: 1, maxLength: 3 }), async (ms) => {
      const mutated = ms.reduce((b, m) => m(b), original);
      const p = file(name, wrap(mutated));
      try {
        await loadTraces([p]);
      } catch (e) {
        if (!(e instanceof BadInputError)) throw new Error(`${name}: ${String(e)} is not a BadInputError`);
        if (!e.message.includes(p)) throw new Error(`${name}: the message does not name the file: ${e.message}`);
      } finally {
        rmSync(p, { force: true });
      }
    }),
    propertyParams(runs),
  );
}

test('fuzz: mutated real traces of every format load or are refused with a BadInputError', async () => {
  const kineto = JSON.parse(gunzipSync(readFileSync(fixture('traces/pytorch-cuda-tuned.pt.trace.json.gz'))).toString()) as {
    traceEvents: unknown[];
    [k: string]: unknown;
  };
  const small = Buffer.from(JSON.stringify({ ...kineto, traceEvents: kineto.traceEvents.filter((_, i) => i % 40 === 0) }));
  await fuzz('kineto.json', small, 150);
  await fuzz('kineto.json.gz', small, 60, (b) => gzipSync(b));
  const csvHead = readFileSync(fixture('traces/rocprofv3-naive/683_memory_copy_trace.csv')).subarray(0, 6000);
  await fuzz('memory_copy_trace.csv', csvHead, 120);
  await fuzz('hip_api_trace.csv', readFileSync(fixture('traces/rocprofv3-naive/683_hip_api_trace.csv')).subarray(0, 6000), 60);
  await fuzz('stats.csv', readFileSync(fixture('traces/rocprof-naive.hip_stats.csv')), 60);
  const rocJson = JSON.parse(gunzipSync(readFileSync(fixture('traces/rocprofv3-naive.json.gz'))).toString()) as {
    'rocprofiler-sdk-tool': Array<{ buffer_records: Record<string, unknown[]> }>;
  };
  const tool = rocJson['rocprofiler-sdk-tool'][0]!;
  for (const k of Object.keys(tool.buffer_records)) tool.buffer_records[k] = tool.buffer_records[k]!.slice(0, 12);
  await fuzz('rocprofv3.json', Buffer.from(JSON.stringify(rocJson)), 120);
  const snap = JSON.parse(gunzipSync(readFileSync(fixture('snapshots/gpt2-train.snapshot.json.gz'))).toString()) as {
    segments: unknown[];
    device_traces: unknown[][];
  };
  await fuzz('snapshot.json', Buffer.from(JSON.stringify({ segments: snap.segments.slice(0, 3), device_traces: [snap.device_traces[0]!.slice(0, 30)] })), 100);
  const sqlite = join(dir, 'copy.sqlite');
  copyFileSync(fixture('traces/nsys-naive.sqlite'), sqlite);
  await fuzz('nsys.sqlite', readFileSync(sqlite), 60);
});
