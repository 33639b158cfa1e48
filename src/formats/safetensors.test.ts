/**
 * The safetensors format in memory: files built here byte by byte from the format's published rules (not by the
 * writer under test), the writer's layout against those rules, round trips, every kind of bad header, and random
 * damage to valid files, which must end in a SafetensorsError and nothing else.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode, isGpuError } from '../errors.js';
import { propertyParams } from '../testing/property.js';
import { parseShardIndex } from './safetensors-index.js';
import {
  dtypeBits,
  layoutSafetensors,
  parseSafetensors,
  SAFETENSORS_DTYPES,
  SafetensorsError,
  serializeSafetensors,
  type SafetensorsDtype,
  type SafetensorsProblem,
} from './safetensors.js';

/** A file as the format's README describes it: u64 LE header length N, N bytes of JSON header, the byte buffer. */
function spec(header: string, data: Uint8Array | number[] = [], n?: number): Uint8Array {
  const h = Buffer.from(header, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(n ?? h.byteLength));
  return new Uint8Array(Buffer.concat([prefix, h, Buffer.from(data)]));
}

function problem(bytes: Uint8Array): SafetensorsProblem | 'ok' {
  try {
    parseSafetensors(bytes);
    return 'ok';
  } catch (e) {
    assert.ok(e instanceof SafetensorsError, `expected a SafetensorsError, got ${String(e)}`);
    assert.equal(e.code, ErrorCode.BAD_INPUT);
    return e.problem;
  }
}

test('a file written by hand from the README parses into its tensors and metadata, data byte-exact', () => {
  const a = new Float32Array([1.5, -2]);
  const b = [7, 8, 9];
  // Offsets deliberately not in key order, leading and trailing JSON whitespace around the header.
  const header =
    '\n {"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} \t\r';
  const file = spec(header, [...new Uint8Array(a.buffer), ...b]);
  const { header: h, data } = parseSafetensors(file);
  assert.equal(h.headerBytes, Buffer.byteLength(header));
  assert.equal(h.dataOffset, 8 + Buffer.byteLength(header));
  assert.equal(h.dataBytes, 11);
  assert.deepEqual(
    h.tensors.map((t) => [t.name, t.dtype, t.shape, t.begin, t.end]),
    [
      ['a', 'F32', [2], 0, 8],
      ['b', 'U8', [3], 8, 11],
    ],
  );
  assert.deepEqual([...(h.metadata ?? [])], [['format', 'pt']]);
  assert.deepEqual([...new Float32Array(data('a').slice().buffer)], [1.5, -2]);
  assert.deepEqual([...data('b')], b);
});

test('scalars, empty tensors, sub-byte dtypes and an empty file are valid', () => {
  assert.equal(problem(spec('{"s":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}', [1, 0, 0, 0])), 'ok');
  assert.equal(problem(spec('{"e":{"dtype":"F16","shape":[2,0],"data_offsets":[0,0]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', [5])), 'ok');
  // F4: 2 elements in 1 byte; F6: 4 elements in 3 bytes.
  assert.equal(
    problem(spec('{"f":{"dtype":"F4","shape":[1,2],"data_offsets":[0,1]},"g":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[1,4]}}', [0, 1, 2, 3])),
    'ok',
  );
  assert.equal(problem(spec('{}')), 'ok');
  // Fields beyond dtype, shape and data_offsets are ignored, as the reference implementation ignores them.
  assert.equal(problem(spec('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"note":1.5}}', [1])), 'ok');
});

test('the writer lays a file out as the format README and its reference writer say', () => {
  // One F32 tensor [1,2,3]: compact JSON, header padded with spaces to a multiple of 8, data right after.
  const data = new Uint8Array(new Float32Array([0, 1, 2, 3, 4, 5]).buffer);
  const json = '{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}';
  const padded = json + ' '.repeat((8 - (json.length % 8)) % 8);
  assert.deepEqual(Buffer.from(serializeSafetensors([{ name: 'attn.0', dtype: 'F32', shape: [1, 2, 3], data }])), Buffer.from(spec(padded, data)));
  // No tensors: "{}" and six spaces.
  assert.deepEqual(Buffer.from(serializeSafetensors([])), Buffer.from(spec('{}      ')));
  // Metadata first.
  const withMeta = serializeSafetensors([], { format: 'pt' });
  assert.equal(Buffer.from(withMeta.subarray(8)).toString(), '{"__metadata__":{"format":"pt"}}');
});

test('the writer orders tensors by dtype, widest first in the format enum order, then by name in UTF-8 bytes', () => {
  const entries = [
    { name: 'b', dtype: 'F16', shape: [1] },
    { name: 'z', dtype: 'F32', shape: [1] },
    { name: 'a', dtype: 'F32', shape: [1] },
    { name: 'c', dtype: 'U8', shape: [1] },
    { name: 'x', dtype: 'BOOL', shape: [1] },
    { name: 'w', dtype: 'F64', shape: [1] },
    { name: '\u{1F600}', dtype: 'U8', shape: [1] }, // U+1F600 sorts after U+FFFD in UTF-8, before it in UTF-16
    { name: '\uFFFD', dtype: 'U8', shape: [1] },
  ] as const;
  const layout = layoutSafetensors(entries);
  assert.deepEqual(
    layout.tensors.map((t) => t.name),
    ['w', 'a', 'z', 'b', 'c', '\uFFFD', '\u{1F600}', 'x'],
  );
  // Each tensor starts aligned to its own element size when the wider ones come first.
  for (const t of layout.tensors) assert.equal((layout.dataOffset + t.begin) % (dtypeBits(t.dtype) / 8), 0, t.name);
});

test('the writer refuses what the format cannot hold, before producing any byte', () => {
  const bad: Array<[unknown, RegExp]> = [
    [[{ name: 'a', dtype: 'F33', shape: [1] }], /unknown dtype/],
    [[{ name: 'a', dtype: 'F32', shape: [-1] }], /non-negative integers/],
    [[{ name: 'a', dtype: 'F32', shape: [1.5] }], /non-negative integers/],
    [[{ name: 'a', dtype: 'F4', shape: [3] }], /byte boundary/],
    [[{ name: '__metadata__', dtype: 'U8', shape: [1] }], /reserved/],
    [[{ name: '\uD800', dtype: 'U8', shape: [1] }], /valid Unicode/],
    [
      [
        { name: 'a', dtype: 'U8', shape: [1] },
        { name: 'a', dtype: 'U8', shape: [1] },
      ],
      /twice/,
    ],
  ];
  for (const [entries, re] of bad) {
    assert.throws(
      () => layoutSafetensors(entries as never),
      (e) => isGpuError(e) && re.test(e.message),
    );
  }
  assert.throws(
    () => serializeSafetensors([{ name: 'a', dtype: 'F32', shape: [2], data: new Uint8Array(7) }]),
    (e) => isGpuError(e, ErrorCode.INVALID_SIZE),
  );
  assert.throws(
    () => layoutSafetensors([], { big: 'x'.repeat(100_000_000) }),
    (e) => isGpuError(e, ErrorCode.INVALID_SIZE),
  );
});

test('every broken rule is refused with its own problem', () => {
  const ok = '{"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}';
  const cases: Array<[string, Uint8Array, SafetensorsProblem]> = [
    ['fewer than 8 bytes', new Uint8Array([1, 0, 0]), 'header-too-small'],
    ['a header of 100,000,001 bytes', spec(ok, [1, 2, 3, 4], 100_000_001), 'header-too-large'],
    ['a header of gigabytes', spec(ok, [1, 2, 3, 4], 5 * 2 ** 30), 'header-too-large'],
    [
      'a header length of 2^64 - 1',
      (() => {
        const f = spec(ok, [1, 2, 3, 4]);
        f.fill(0xff, 0, 8);
        return f;
      })(),
      'header-too-large',
    ],
    ['a header length past the end of the file', spec(ok, [], 1000), 'header-length'],
    ['a header that is not UTF-8', spec('{"ab":1}').map((x, i) => (i === 10 ? 0xff : x)), 'header-utf8'],
    ['a header that is not JSON', spec('{"t":'), 'header-json'],
    ['a header that is an array', spec('[]'), 'header-json'],
    ['a header nested a million deep', spec(`{"a":${'['.repeat(1e6)}${']'.repeat(1e6)}}`), 'header-json'],
    [
      'a duplicate tensor',
      spec('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', [1, 2]),
      'duplicate-key',
    ],
    ['a duplicate field', spec('{"t":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}', [1]), 'duplicate-key'],
    ['an unknown dtype', spec('{"t":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}', new Array(16).fill(0)), 'unknown-dtype'],
    ['a dtype in lower case', spec('{"t":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}', [0, 0, 0, 0]), 'unknown-dtype'],
    ['a negative dimension', spec('{"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'), 'bad-entry'],
    ['a fractional dimension', spec('{"t":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}', [0]), 'bad-entry'],
    ['a dimension in exponent form', spec('{"t":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}', [0]), 'bad-entry'],
    ['no shape', spec('{"t":{"dtype":"U8","data_offsets":[0,1]}}', [0]), 'bad-entry'],
    ['three offsets', spec('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}', [0]), 'bad-entry'],
    ['a tensor that is not an object', spec('{"t":[1]}'), 'bad-entry'],
    ['offsets past the end', spec('{"t":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}', [1, 2, 3, 4]), 'incomplete-buffer'],
    ['offsets beyond 2^64', spec('{"t":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551616,18446744073709551617]}}', [1]), 'incomplete-buffer'],
    ['end before begin', spec('{"t":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}', [1, 2]), 'invalid-offset'],
    [
      'overlapping tensors',
      spec('{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', [1, 2, 3, 4]),
      'invalid-offset',
    ],
    [
      'the same bytes twice',
      spec('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', [1, 2, 3, 4]),
      'invalid-offset',
    ],
    [
      'a hole between tensors',
      spec('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', [1, 2, 3, 4]),
      'invalid-offset',
    ],
    ['a hole before the first tensor', spec('{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', [1, 2, 3, 4]), 'invalid-offset'],
    ['a shape that does not match the byte size', spec('{"t":{"dtype":"I32","shape":[2,2],"data_offsets":[0,4]}}', [0, 0, 0, 0]), 'size-mismatch'],
    [
      'a shape whose size overflows 64 bits',
      spec('{"t":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}', new Array(16).fill(0)),
      'size-mismatch',
    ],
    ['F4 ending inside a byte', spec('{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', [0, 0]), 'misaligned'],
    ['a file shorter than its header says', spec(ok, [1, 2, 3]), 'incomplete-buffer'],
    ['bytes after the last tensor', spec(ok, [1, 2, 3, 4, 5]), 'incomplete-buffer'],
    ['metadata that is not strings', spec('{"__metadata__":{"n":1}}'), 'metadata'],
    ['metadata that is an array', spec('{"__metadata__":["a"]}'), 'metadata'],
  ];
  for (const [what, bytes, expected] of cases) assert.equal(problem(bytes), expected, what);
});

test('a tensor named __proto__ is an ordinary tensor', () => {
  const { header } = parseSafetensors(spec('{"__proto__":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', [9]));
  assert.deepEqual(
    header.tensors.map((t) => t.name),
    ['__proto__'],
  );
});

const dtypeArb = fc.constantFrom<SafetensorsDtype>(...SAFETENSORS_DTYPES);
const tensorArb = fc
  .record({
    name: fc.string({ minLength: 0, maxLength: 12, unit: 'grapheme' }),
    dtype: dtypeArb,
    shape: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
  })
  .filter((t) => t.name !== '__metadata__')
  .map((t) => {
    // Sub-byte dtypes need a multiple of 8 bits: double the last dimension's element count as needed.
    const bits = dtypeBits(t.dtype);
    const shape = bits % 8 === 0 ? t.shape : [...t.shape, 4];
    const count = shape.reduce((a, b) => a * b, 1);
    const data = Uint8Array.from({ length: (count * bits) / 8 }, (_, i) => (i * 31 + t.name.length) & 0xff);
    return { ...t, shape, data };
  });
const filesArb = fc.record({
  tensors: fc.uniqueArray(tensorArb, { maxLength: 12, selector: (t) => t.name }),
  metadata: fc.option(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }), { nil: undefined }),
});

test('round trip: every file the writer makes parses back to the same tensors, bytes and metadata', () => {
  fc.assert(
    fc.property(filesArb, ({ tensors, metadata }) => {
      const bytes = serializeSafetensors(tensors, metadata);
      assert.equal(new DataView(bytes.buffer).getUint32(0, true) % 8, 0, 'the header is padded to a multiple of 8 bytes');
      const { header, data } = parseSafetensors(bytes);
      assert.equal(header.dataOffset % 8, 0, 'the byte buffer starts 8-aligned');
      assert.equal(header.tensors.length, tensors.length);
      for (const t of tensors) {
        const info = header.byName.get(t.name);
        assert.ok(info, t.name);
        assert.equal(info.dtype, t.dtype);
        assert.deepEqual(info.shape, t.shape);
        assert.deepEqual(Buffer.from(data(t.name)), Buffer.from(t.data));
      }
      if (metadata === undefined) assert.equal(header.metadata, undefined);
      else assert.deepEqual(Object.fromEntries(header.metadata ?? []), { ...metadata });
      // Writing what was read gives the same bytes again.
      const again = serializeSafetensors(
        header.tensors.map((t) => ({ ...t, data: data(t.name) })),
        header.metadata,
      );
      assert.deepEqual(Buffer.from(again), Buffer.from(bytes));
    }),
    propertyParams(150),
  );
});

test('random damage to a valid file ends in a SafetensorsError or a valid file, never anything else', () => {
  fc.assert(
    fc.property(
      filesArb,
      fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), { minLength: 1, maxLength: 4 }),
      fc.option(fc.nat(), { nil: undefined }),
      ({ tensors, metadata }, flips, cut) => {
        const bytes = serializeSafetensors(tensors, metadata).slice();
        for (const f of flips) bytes[f.at % bytes.byteLength] = f.value;
        const damaged = cut === undefined ? bytes : bytes.subarray(0, cut % (bytes.byteLength + 1));
        const p = problem(damaged);
        if (p === 'ok') {
          // A file still accepted still obeys every rule: the tensors cover the byte buffer exactly.
          const { header } = parseSafetensors(damaged);
          assert.equal(header.dataOffset + header.tensors.reduce((s, t) => s + t.bytes, 0), damaged.byteLength);
        }
      },
    ),
    propertyParams(300),
  );
});

test('a shard index: the weight map and its shards; shard names that leave the folder are refused', () => {
  const idx = parseShardIndex(
    JSON.stringify({
      metadata: { total_size: 24 },
      weight_map: {
        'a.weight': 'model-00001-of-00002.safetensors',
        'b.weight': 'model-00002-of-00002.safetensors',
        'a.bias': 'model-00001-of-00002.safetensors',
      },
    }),
  );
  assert.deepEqual(idx.shards, ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
  assert.equal(idx.weightMap.get('a.bias'), 'model-00001-of-00002.safetensors');
  assert.equal(idx.metadata?.total_size, 24);
  for (const bad of ['../x.safetensors', '/etc/passwd', 'sub/x.safetensors', '..', '', 3]) {
    assert.throws(
      () => parseShardIndex(JSON.stringify({ weight_map: { t: bad } })),
      (e) => e instanceof SafetensorsError && e.problem === 'bad-index',
      String(bad),
    );
  }
  assert.throws(
    () => parseShardIndex('{"weight_map": [1]}'),
    (e) => e instanceof SafetensorsError && e.problem === 'bad-index',
  );
  assert.throws(
    () => parseShardIndex('not json'),
    (e) => e instanceof SafetensorsError && e.problem === 'bad-index',
  );
});
