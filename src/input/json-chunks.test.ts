/**
 * The chunked JSON reader against the careful one: for any document, the same values at the same paths, or the same
 * refusal. Documents are generated (fast-check) with the strings that make cutting hard — escaped quotes, runs of
 * backslashes, multi-byte characters — and read in pieces as small as one byte, so that every boundary falls inside
 * a string, an escape and a character somewhere.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { CHUNK_BYTES, walkJsonChunked } from './json-chunks.js';
import { ErrorCode, isGpuError } from '../errors.js';
import { walkJson, type Json, type JsonLimits, type PathKey } from './json-stream.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-json-chunks-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const write = (text: string | Buffer): string => {
  const f = join(dir, `doc-${n++}.json`);
  writeFileSync(f, text);
  return f;
};

/** Kineto's selection: trace events, device properties, or the elements of a top-level array. */
const select = (p: readonly PathKey[]): boolean =>
  (p.length === 2 && typeof p[1] === 'number' && (p[0] === 'traceEvents' || p[0] === 'deviceProperties')) || (p.length === 1 && typeof p[0] === 'number');

/** The values a reader handed over, in order. A refusal is not caught here: a test that expects one asserts it. */
async function read(
  reader: 'careful' | 'chunked',
  file: string,
  options: { pieceBytes?: number; chunkBytes?: number; limits?: Partial<JsonLimits> } = {},
): Promise<Array<[readonly PathKey[], Json]>> {
  const values: Array<[readonly PathKey[], Json]> = [];
  if (reader === 'careful') await walkJson(file, select, (p, v) => values.push([[...p], v]), options);
  else await walkJsonChunked(file, select, (p, v) => values.push([[...p], v]), options);
  return values;
}

const tricky = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', '"', '\\', '\\\\', '\\"', 'é', '€', '😀', ',', ']', '}', '[', '{', ' ', '\n') }),
  fc.string(),
  fc.constant('\\'.repeat(7)),
);
/** Keys include the ones an object's prototype answers to, which a reader must keep as plain members. */
const key = fc.oneof(tricky, fc.constantFrom('__proto__', 'constructor', 'toString', 'bytes'));
const scalar = fc.oneof(tricky, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const event = fc.dictionary(key, fc.oneof(scalar, fc.dictionary(key, scalar, { maxKeys: 3 }), fc.array(scalar, { maxLength: 3 })), { maxKeys: 5 });
const doc = fc.record(
  { traceEvents: fc.array(event, { maxLength: 12 }), deviceProperties: fc.array(event, { maxLength: 2 }), other: fc.oneof(scalar, event), ' "x" ': tricky },
  { requiredKeys: ['traceEvents'] },
);
/** JSON text of a generated document: JSON.stringify writes a "__proto__" member as any other. */
const text = (d: unknown, pretty: boolean): string => JSON.stringify(d, null, pretty ? 2 : undefined);

test('any document reads the same with both readers, in pieces of 1 to 64 bytes and chunks of 1 to 256 bytes', async () => {
  await fc.assert(
    fc.asyncProperty(doc, fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 256 }), fc.boolean(), async (d, piece, chunk, pretty) => {
      const file = write(text(d, pretty));
      const careful = await read('careful', file);
      // every selected value is handed over: the events, then the device properties
      assert.equal(careful.length, d.traceEvents.length + (d.deviceProperties?.length ?? 0));
      assert.deepEqual(await read('chunked', file, { pieceBytes: piece, chunkBytes: chunk }), careful);
      assert.deepEqual(await read('chunked', file), careful);
    }),
    propertyParams(150),
  );
});

test("an array of arrays (a snapshot's device_traces) is cut one level down and reads the same as with the careful reader", async () => {
  const snapshotSelect = (p: readonly PathKey[]): boolean =>
    (p.length === 3 && p[0] === 'device_traces' && typeof p[2] === 'number') || (p.length === 2 && p[0] === 'segments');
  const descend = (p: readonly PathKey[]): boolean => p.length === 1 && p[0] === 'device_traces';
  const traces = fc.array(fc.oneof({ weight: 4, arbitrary: fc.array(event, { maxLength: 6 }) }, { weight: 1, arbitrary: event }), { maxLength: 4 });
  await fc.assert(
    fc.asyncProperty(
      traces,
      fc.array(event, { maxLength: 3 }),
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 128 }),
      fc.boolean(),
      async (t, segs, piece, chunk, pretty) => {
        const file = write(text({ segments: segs, device_traces: t, after: 1 }, pretty));
        const careful: Array<[readonly PathKey[], Json]> = [];
        await walkJson(file, snapshotSelect, (p, v) => careful.push([[...p], v]));
        const chunked: Array<[readonly PathKey[], Json]> = [];
        await walkJsonChunked(file, snapshotSelect, (p, v) => chunked.push([[...p], v]), { pieceBytes: piece, chunkBytes: chunk, descend });
        assert.deepEqual(chunked, careful);
      },
    ),
    propertyParams(150),
  );
  // one device's events far past what one selected value may hold: cut, not refused
  const big = Array.from({ length: 40_000 }, (_, i) => ({ action: 'alloc', addr: i, size: 512, stream: 0, frames: [{ name: 'x'.repeat(40) }] }));
  const file = write(JSON.stringify({ device_traces: [big, big.slice(0, 3)] }));
  let events = 0;
  await walkJsonChunked(file, snapshotSelect, () => events++, { descend, limits: { maxValueChars: 1 << 20 } });
  assert.equal(events, 40_003);
});

test('documents larger than the chunk of whole events parsed at once read the same as with the careful reader', async () => {
  // the events are repeated until the array is past CHUNK_BYTES, so the default reader flushes mid-array
  await fc.assert(
    fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 20 }), fc.integer({ min: 4096, max: 1 << 16 }), async (events, piece) => {
      const one = events.map((e) => JSON.stringify(e)).join(',');
      const copies = Math.ceil((1.5 * CHUNK_BYTES) / (one.length + 1));
      const file = write(`{"traceEvents":[${new Array(copies).fill(one).join(',')}]}`);
      const careful = await read('careful', file);
      assert.equal(careful.length, copies * events.length);
      assert.deepEqual(await read('chunked', file, { pieceBytes: piece }), careful);
    }),
    propertyParams(6),
  );
});

test('a "__proto__" member is an ordinary member for both readers: it lends no fields to the event', async () => {
  const file = write('{"traceEvents":[{"__proto__":{"bytes":1048576,"ts":5},"name":"x"}]}');
  for (const reader of ['careful', 'chunked'] as const) {
    const [[, v]] = (await read(reader, file)) as [[readonly PathKey[], Record<string, unknown>]];
    assert.equal(Object.getPrototypeOf(v), Object.prototype, reader);
    assert.equal(v.bytes, undefined, `${reader}: no inherited bytes`);
    assert.deepEqual(Object.keys(v), ['__proto__', 'name'], reader);
    assert.deepEqual(Object.getOwnPropertyDescriptor(v, '__proto__')?.value, { bytes: 1048576, ts: 5 }, reader);
  }
});

test('a top-level array of events, gzip, and a byte-order mark read the same', async () => {
  const events = [
    { name: 'a"b\\', ts: 1 },
    { name: '€', ts: 2 },
  ];
  for (const text of [JSON.stringify(events), `\uFEFF${JSON.stringify({ traceEvents: events })}`, ` \n${JSON.stringify({ traceEvents: [] })}\n `]) {
    for (const file of [write(text), write(gzipSync(text))]) {
      const careful = await read('careful', file);
      assert.equal(careful.length, text.includes('traceEvents":[]') ? 0 : 2);
      assert.deepEqual(await read('chunked', file, { pieceBytes: 3 }), careful);
    }
  }
});

test('long strings are cut at the limit and marked, as the careful reader cuts them', async () => {
  const file = write(JSON.stringify({ traceEvents: [{ name: 'x'.repeat(100), args: { k: 'é'.repeat(50) } }, { name: 'short' }] }));
  const limits = { maxString: 16 };
  const careful = await read('careful', file, { limits });
  assert.deepEqual(await read('chunked', file, { limits, pieceBytes: 5 }), careful);
  assert.equal((careful[0]![1] as { name: string }).name, `${'x'.repeat(16)}…[cut]`);
});

test('bad documents are refused: truncated, trailing data, too deep, too large, not JSON', async () => {
  const cases: Array<[string, RegExp, Partial<JsonLimits>?]> = [
    ['{"traceEvents":[{"a":1},{"b":', /ends in the middle|not valid JSON/],
    ['{"traceEvents":[]} x', /unexpected data after the end/],
    ['{"traceEvents":[{"a":1,}]}', /not valid JSON/],
    [`{"traceEvents":${'['.repeat(100_000)}`, /nested deeper than 32/],
    [`{"metadata":${'['.repeat(100_000)}`, /nesting deeper than 256/],
    ['{"traceEvents":[{"big":"' + 'y'.repeat(5000) + '"}]}', /holds more than 1000 characters/, { maxValueChars: 1000 }],
    ['"just a string"', /neither an object nor an array/],
    ['', /ends in the middle/],
  ];
  for (const [text, message, limits] of cases) {
    const file = write(text);
    await assert.rejects(
      read('chunked', file, { pieceBytes: 7, limits }),
      (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && message.test((e as Error).message),
      text.slice(0, 40),
    );
    // the careful reader refuses it too (in its own words), except a lone scalar, in which it finds nothing selected
    if (text.startsWith('"')) assert.deepEqual(await read('careful', file, { limits }), []);
    else await assert.rejects(read('careful', file, { limits }), (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT), text.slice(0, 40));
  }
});
