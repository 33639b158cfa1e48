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
import { walkJsonChunked } from './json-chunks.js';
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

type Outcome = { values: Array<[readonly PathKey[], Json]> } | { error: string };

async function read(reader: 'careful' | 'chunked', file: string, options: { pieceBytes?: number; limits?: Partial<JsonLimits> } = {}): Promise<Outcome> {
  const values: Array<[readonly PathKey[], Json]> = [];
  try {
    if (reader === 'careful') await walkJson(file, select, (p, v) => values.push([[...p], v]), options);
    else await walkJsonChunked(file, select, (p, v) => values.push([[...p], v]), options);
    return { values };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

const tricky = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', '"', '\\', '\\\\', '\\"', 'é', '€', '😀', ',', ']', '}', '[', '{', ' ', '\n') }),
  fc.string(),
  fc.constant('\\'.repeat(7)),
);
const scalar = fc.oneof(tricky, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const event = fc.dictionary(tricky, fc.oneof(scalar, fc.dictionary(tricky, scalar, { maxKeys: 3 }), fc.array(scalar, { maxLength: 3 })), { maxKeys: 5 });
const doc = fc.record(
  { traceEvents: fc.array(event, { maxLength: 12 }), deviceProperties: fc.array(event, { maxLength: 2 }), other: fc.oneof(scalar, event), ' "x" ': tricky },
  { requiredKeys: ['traceEvents'] },
);

test('any document reads the same with both readers, in pieces of 1 to 64 bytes', async () => {
  await fc.assert(
    fc.asyncProperty(doc, fc.integer({ min: 1, max: 64 }), fc.boolean(), async (d, piece, pretty) => {
      const file = write(JSON.stringify(d, null, pretty ? 2 : undefined));
      const careful = await read('careful', file);
      assert.deepEqual(await read('chunked', file, { pieceBytes: piece }), careful);
      assert.deepEqual(await read('chunked', file), careful);
    }),
    propertyParams(150),
  );
});

test('a top-level array of events, gzip, and a byte-order mark read the same', async () => {
  const events = [
    { name: 'a"b\\', ts: 1 },
    { name: '€', ts: 2 },
  ];
  for (const text of [JSON.stringify(events), `\uFEFF${JSON.stringify({ traceEvents: events })}`, ` \n${JSON.stringify({ traceEvents: [] })}\n `]) {
    for (const file of [write(text), write(gzipSync(text))]) assert.deepEqual(await read('chunked', file, { pieceBytes: 3 }), await read('careful', file));
  }
});

test('long strings are cut at the limit and marked, as the careful reader cuts them', async () => {
  const file = write(JSON.stringify({ traceEvents: [{ name: 'x'.repeat(100), args: { k: 'é'.repeat(50) } }, { name: 'short' }] }));
  const limits = { maxString: 16 };
  const careful = await read('careful', file, { limits });
  assert.deepEqual(await read('chunked', file, { limits, pieceBytes: 5 }), careful);
  assert.ok('values' in careful);
  assert.equal((careful.values[0]![1] as { name: string }).name, `${'x'.repeat(16)}…[cut]`);
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
    const out = await read('chunked', write(text), { pieceBytes: 7, limits });
    assert.ok('error' in out, `${text.slice(0, 40)} is refused`);
    assert.match(out.error, message);
  }
});
