/**
 * Hostile files made here, read by the real CLI in child processes whose heap is held to 400 MB: memory out of
 * proportion to the input (a safetensors header of one 99 MB string, gzip bombs of valid events for analyze, pool
 * replay and pickles) is refused with a short message, not held, and the messages name the file and what is wrong
 * in words (a pipe, a folder, a negative or fractional size, a repeated key, an out-of-memory).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { EventBudget, MAX_EVENT_BYTES, TraceModel } from '../analyze/model.js';
import { serializeSafetensors } from '../formats/safetensors.js';
import { writePickle } from '../testing/pickle-writer.js';
import { MAX_INFLATED_BYTES } from './files.js';

const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-hostile-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const MiB = 2 ** 20;

/** The CLI in a child with a 400 MB heap: a reader that holds what it should not dies of it (exit 134), not passes. */
function cli(args: string[], env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--max-old-space-size=400', CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GPUMEM_BACKEND: 'host', ...env },
    maxBuffer: 64 * MiB,
    timeout: 300_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** A safetensors file written byte by byte: the u64 length, the header padded to 8 bytes, no data. */
function headerFile(name: string, header: string): string {
  const h = Buffer.from(header);
  const n = Math.ceil(h.length / 8) * 8;
  const b = Buffer.alloc(8 + n, 0x20);
  b.writeBigUInt64LE(BigInt(n));
  h.copy(b, 8);
  const file = join(dir, name);
  writeFileSync(file, b);
  return file;
}

/** A gzip file of `head`, `body` repeated `times` times (one gzip member, concatenated), then `tail`: small on disk. */
function bomb(name: string, head: string, body: string, times: number, tail: string): string {
  const member = gzipSync(Buffer.from(body), { level: 9 });
  const file = join(dir, name);
  writeFileSync(file, Buffer.concat([gzipSync(head), ...Array<Buffer>(times).fill(member), gzipSync(tail)]));
  return file;
}

test('a safetensors header of one 99 MB name, dtype or metadata value: refused or read in proportion, quoted in 200 characters', () => {
  const big = 'A'.repeat(99_000_000);
  const cases = [
    ['name', `{"${big}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, /a name of 99000000 characters; at most 65536 are read/],
    ['dtype', `{"a":{"dtype":"${big}","shape":[0],"data_offsets":[0,0]}}`, /unknown dtype "A{40}"\.\.\. \(99000000 characters\)/],
    ['shape', `{"a":{"dtype":"F32","shape":${'['.repeat(20_000_000)}`, /nested deeper than 4 levels/],
  ] as const;
  for (const [what, header, message] of cases) {
    const r = cli(['load-weights', headerFile(`${what}.safetensors`, header)]);
    assert.equal(r.code, 2, `${what}: ${r.err.slice(0, 300)}`);
    assert.match(r.err, message, what);
    assert.ok(r.err.length < 1000, `${what}: the message quotes at most a few hundred characters (${r.err.length})`);
  }
  // a long metadata value is data the format allows: read, and the load goes on
  const meta = cli(['load-weights', headerFile('meta.safetensors', `{"__metadata__":{"k":"${big}"},"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`)]);
  assert.equal(meta.code, 0, meta.err.slice(0, 300));
});

test('a safetensors key repeated with the same value is refused, as every repeat is', () => {
  const entry = '{"dtype":"F32","shape":[0],"data_offsets":[0,0]}';
  for (const header of [`{"a":${entry},"a":${entry}}`, `{"__metadata__":{"k":"v","k":"v"},"a":${entry}}`]) {
    const r = cli(['load-weights', headerFile('dup.safetensors', header)]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /repeats a key: the key "(a|k)" appears twice/);
  }
});

test('a gzip bomb of valid Kineto events is refused at the inflation cap; progress counts inflated bytes', () => {
  const event = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0,"stream":7,"correlation":1}},';
  const body = event.repeat(Math.ceil(MiB / event.length));
  const file = bomb('bomb.pt.trace.json.gz', '{"traceEvents":[', body, Math.ceil((MAX_INFLATED_BYTES * 1.5) / body.length), '{}]}');
  const r = cli(['analyze', file, '--progress']);
  assert.equal(r.code, 2, r.err.slice(-500));
  assert.match(r.err, /inflates to more than 256 MiB .*GPUMEM_MAX_INFLATED_BYTES/);
  const lines = r.err.split('\n').filter((l) => l.startsWith('reading '));
  assert.ok(lines.length >= 1, r.err.slice(0, 500));
  for (const l of lines) {
    const pct = /(\d+)% of/.exec(l);
    if (pct) assert.ok(Number(pct[1]) <= 100, l);
    else assert.match(l, /\d+ MiB read$/, l);
  }
  assert.equal(new Set(lines).size, lines.length, 'no line printed twice');
});

test('a gzip bomb of valid snapshot events is refused at the cap in pool replay and analyze', () => {
  const event = '{"action":"alloc","addr":1024,"size":512,"stream":0,"frames":[]},{"action":"free_completed","addr":1024,"size":512,"stream":0,"frames":[]},';
  const body = event.repeat(Math.ceil(MiB / event.length));
  const file = bomb(
    'bomb.snapshot.json.gz',
    '{"segments":[],"device_traces":[[',
    body,
    Math.ceil((MAX_INFLATED_BYTES * 1.5) / body.length),
    '{"action":"oom"}]]}',
  );
  for (const args of [
    ['pool', 'replay', file],
    ['analyze', file],
  ]) {
    const r = cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.err.slice(-500)}`);
    assert.match(r.err, /inflates to more than 256 MiB/);
  }
});

test('a gzip bomb of a pickle is refused at the cap, before it is held whole', () => {
  // a list of one short string, repeated: the pickle's bytes are a few MB of gzip
  const one = writePickle({ device_traces: [[{ action: 'alloc', addr: 1, size: 512, stream: 0 }]], segments: [] });
  const frame = Buffer.from(one.subarray(0, one.length - 1)); // without STOP
  const pad = Buffer.alloc(MiB, 0x4e); // NONE opcodes: valid, and each adds a None to the stack
  const file = join(dir, 'bomb.pickle.gz');
  const member = gzipSync(pad, { level: 9 });
  writeFileSync(file, Buffer.concat([gzipSync(frame), ...Array<Buffer>(400).fill(member), gzipSync(Buffer.from('.'))]));
  const r = cli(['pool', 'replay', file]);
  assert.equal(r.code, 2, r.err.slice(-500));
  assert.match(r.err, /inflates to more than 256 MiB|the pickle holds more than/);
});

test('the event columns of one model are capped: a trace of more events than that is refused, not held', () => {
  const budget = new EventBudget();
  const model = new TraceModel();
  const row = { start: 0, end: 1, bytes: 8, dir: 0, src: 0, dst: 0, stream: 0, device: 0, correlation: 0, hostAddr: 0, op: -1 };
  assert.throws(
    () => {
      for (let i = 0; i < (MAX_EVENT_BYTES / 88) * 2; i++) model.copies.push(row);
    },
    (e: unknown) => e instanceof Error && /more events than gpumem keeps in memory/.test(e.message),
  );
  assert.ok(model.copies.length <= MAX_EVENT_BYTES / 88 + 1, 'refused at the budget, not after');
  assert.equal(budget.left, MAX_EVENT_BYTES, 'a budget of its own per model');
});

test('a pipe, /dev/zero, a folder and an empty file are refused by what they are', () => {
  const fifo = join(dir, 'pipe.json');
  execFileSync('mkfifo', [fifo]);
  const folder = join(dir, 'a-folder');
  mkdirSync(folder);
  const empty = join(dir, 'empty.json');
  writeFileSync(empty, '');
  for (const [args, why] of [
    [['analyze', fifo], /not a regular file \(a pipe, a device or a socket\)/],
    [['analyze', '/dev/zero'], /not a regular file/],
    [['analyze', '--format', 'kineto', fifo], /not a regular file/],
    [['pool', 'replay', fifo], /not a regular file/],
    [['pool', 'replay', '/dev/zero'], /not a regular file/],
    [['pool', 'replay', folder], /a folder, not a trace file/],
    [['pool', 'replay', empty], /the file is empty/],
    [['analyze', empty], /the file is empty/],
  ] as const) {
    const r = cli([...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
    assert.match(r.err, why, args.join(' '));
    assert.doesNotMatch(r.err, /EISDIR|EACCES|truncated or corrupt/, args.join(' '));
  }
});

test('a negative or fractional size in a snapshot or a log names the file and the event', () => {
  const snap = (size: string): string => {
    const f = join(dir, `size-${size}.json`);
    writeFileSync(f, `{"segments":[],"device_traces":[[{"action":"alloc","addr":1024,"size":${size},"stream":0}]]}`);
    return f;
  };
  for (const [file, why] of [
    [snap('-5'), /device_traces\[0\]\[0\]\.size is negative \(-5\)/],
    [snap('0.5'), /device_traces\[0\]\[0\]\.size is not a whole number: 0\.5/],
  ] as const) {
    for (const cmd of [['pool', 'replay'], ['analyze']]) {
      const r = cli([...cmd, file]);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, why);
      assert.ok(r.err.includes(file), 'the file is named');
      assert.doesNotMatch(r.err, /CachingPool|not an integer/);
    }
  }
  const log = join(dir, 'neg.ndjson');
  writeFileSync(log, '{"t":1,"action":"allocate","address":4096,"bytes":-5,"stream":0}\n');
  assert.match(cli(['pool', 'replay', log]).err, /line 1 bytes is negative \(-5\)/);
  const huge = snap(String(Number.MAX_SAFE_INTEGER));
  const r = cli(['pool', 'replay', huge]);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /event 0 \(an allocation of 9007199254740991 bytes at 0x400\): the pool cannot replay it/);
});

test('pool replay --config NAME TRACE: the trace after a variadic option is the trace', () => {
  const f = join(dir, 'small.json');
  writeFileSync(
    f,
    '{"segments":[],"device_traces":[[{"action":"alloc","addr":1024,"size":512,"stream":0},{"action":"free_completed","addr":1024,"size":512,"stream":0}]]}',
  );
  for (const args of [
    ['pool', 'replay', '--config', 'gpumem', f, '--json'],
    ['pool', 'replay', '--config', 'gpumem', 'gpumem-growable', f, '--json'],
    ['pool', 'replay', f, '--config', 'gpumem', '--json'],
  ]) {
    const r = cli(args);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.err}`);
    const names = (JSON.parse(r.out) as { configurations: Array<{ name: string }> }).configurations.map((c) => c.name);
    assert.deepEqual(names, args.includes('gpumem-growable') ? ['gpumem', 'gpumem-growable'] : ['gpumem']);
  }
  const none = cli(['pool', 'replay', '--config', 'gpumem']);
  assert.equal(none.code, 2);
  assert.match(none.err, /missing the trace/);
});

test('load-weights out of memory names the checkpoint and its largest tensor', () => {
  const f = join(dir, 'big.safetensors');
  writeFileSync(
    f,
    serializeSafetensors([
      { name: 'small', dtype: 'F32', shape: [4], data: new Uint8Array(16) },
      { name: 'model.embed', dtype: 'F32', shape: [4 * MiB], data: new Uint8Array(16 * MiB) },
    ]),
  );
  const r = cli(['load-weights', f], { GPUMEM_HOST_DEVICE_BYTES: String(8 * MiB) });
  assert.equal(r.code, 1, r.err);
  assert.ok(r.err.includes(f), r.err);
  assert.match(r.err, /2 tensor\(s\) need 16\.0 MiB on device 0; the largest, "model\.embed" .* is 16\.0 MiB: out of memory/);
});
