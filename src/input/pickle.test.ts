/** The pickle reader: plain data read as JSON would read it, everything that would run code refused, bad bytes never a crash. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import fc from 'fast-check';
import { BadInputError } from '../errors.js';
import { propertyParams } from '../testing/property.js';
import { Tuple, writePickle, type PickleInput } from '../testing/pickle-writer.js';
import { isPickle, parsePickle, pickleHead, UnsafePickleError, walkPickle, type PickleValue } from './pickle.js';

const PROTOCOLS = [2, 3, 4, 5] as const;

/** A pickle of protocol 4 from raw opcodes (PROTO 4 first, STOP last). */
const raw = (...ops: Array<number | string>): Buffer =>
  Buffer.concat([Buffer.from([0x80, 4]), ...ops.map((o) => (typeof o === 'string' ? Buffer.from(o, 'latin1') : Buffer.from([o]))), Buffer.from([0x2e])]);

/** JSON text of a value read from a pickle, with bigints and bytes spelled out. */
const text = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? { bytes: [...x] } : x));

test('plain values read back as JSON reads them, in every protocol from 2 to 5', () => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.constantFrom(...PROTOCOLS), (v, protocol) => {
      const back = parsePickle(writePickle(v as PickleInput, protocol), { exactInts: false });
      assert.equal(JSON.stringify(back), JSON.stringify(v));
    }),
    propertyParams(200),
  );
});

test('ints beyond 2^53 come back exact (as bigint, or as the nearest number when asked), negative LONG1 included', () => {
  const big = { a: -(2n ** 40n), b: 2n ** 70n, c: -(2n ** 63n), d: 2n ** 31n, e: -1, f: 255, g: 65535, h: -(2n ** 31n) };
  for (const p of PROTOCOLS) {
    const v = parsePickle(writePickle(big, p)) as Record<string, unknown>;
    assert.equal(v.a, -(2 ** 40), 'within 2^53: a number');
    assert.equal(v.b, 2n ** 70n);
    assert.equal(v.c, -(2n ** 63n));
    assert.equal(v.d, 2 ** 31);
    assert.deepEqual([v.e, v.f, v.g, v.h], [-1, 255, 65535, -(2 ** 31)]);
    const loose = parsePickle(writePickle(big, p), { exactInts: false }) as Record<string, unknown>;
    assert.equal(loose.b, 2 ** 70);
  }
});

test('a "__proto__" key is a key of the dict, not its prototype, and nothing else changes', () => {
  const v = parsePickle(writePickle(JSON.parse('{"__proto__": {"bytes": 5}, "ts": 1}') as PickleInput)) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(v), null);
  assert.ok(Object.hasOwn(v, '__proto__'));
  assert.equal(v.bytes, undefined);
  assert.equal(({} as Record<string, unknown>).bytes, undefined);
  assert.equal(text(v), '{"__proto__":{"bytes":5},"ts":1}');
});

test('tuples, sets, bytes and the memo: a container written once and used twice is the same value', () => {
  const shared = [{ name: 'f', filename: 'a.py', line: 3 }];
  const v = parsePickle(
    writePickle({ t: new Tuple([1, new Tuple([2, 3]), new Tuple([1, 2, 3, 4])]), b: new Uint8Array([0, 255]), x: shared, y: shared }, 4),
  ) as Record<string, PickleValue>;
  assert.equal(text(v.t), '[1,[2,3],[1,2,3,4]]');
  assert.deepEqual([...(v.b as Uint8Array)], [0, 255]);
  assert.equal(v.x, v.y, 'one memo entry, one value');
  // known names of plain data: OrderedDict(), then its items
  const od = parsePickle(raw(0x63, 'collections\nOrderedDict\n', 0x29, 0x52, 0x8c, 1, 'a', 0x4b, 1, 0x73)) as Record<string, unknown>;
  assert.equal(text(od), '{"a":1}');
});

test('every opcode that imports, calls or builds is refused by name, with its offset, before anything is used', () => {
  const cases: Array<[string, Buffer, string | undefined]> = [
    ['GLOBAL', raw(0x63, 'os\nsystem\n'), 'os.system'],
    ['STACK_GLOBAL', raw(0x8c, 2, 'os', 0x8c, 6, 'system', 0x93), 'os.system'],
    ['REDUCE', raw(0x5d, 0x29, 0x52), undefined],
    ['REDUCE', raw(0x63, 'collections\nOrderedDict\n', 0x4b, 1, 0x85, 0x52), 'collections.OrderedDict'],
    ['BUILD', raw(0x7d, 0x7d, 0x62), undefined],
    ['INST', raw(0x28, 0x69, 'os\nsystem\n'), undefined],
    ['OBJ', raw(0x28, 0x5d, 0x6f), undefined],
    ['NEWOBJ', raw(0x5d, 0x29, 0x81), undefined],
    ['NEWOBJ_EX', raw(0x5d, 0x29, 0x7d, 0x92), undefined],
    ['PERSID', raw(0x50, '1\n'), undefined],
    ['BINPERSID', raw(0x4b, 1, 0x51), undefined],
    ['EXT1', raw(0x82, 1), undefined],
    ['EXT2', raw(0x83, 1, 0), undefined],
    ['EXT4', raw(0x84, 1, 0, 0, 0), undefined],
    ['NEXT_BUFFER', raw(0x97), undefined],
    ['READONLY_BUFFER', raw(0x43, 1, 'x', 0x98), undefined],
  ];
  for (const [opcode, bytes, global] of cases) {
    assert.throws(
      () => parsePickle(bytes, { file: 'x.pickle' }),
      (e: unknown) =>
        e instanceof UnsafePickleError &&
        e instanceof BadInputError &&
        e.code === 'GPUMEM_BAD_INPUT' &&
        e.opcode === opcode &&
        e.global === global &&
        e.offset >= 2 &&
        e.offset < bytes.length &&
        e.message.startsWith('x.pickle: '),
      opcode,
    );
  }
});

test('protocols 0 and 1, other protocols and text opcodes are refused with what they are', () => {
  assert.throws(() => parsePickle(Buffer.from('(lp0\nI1\na.')), /protocol 0 and 1/);
  assert.throws(() => parsePickle(Buffer.from([0x80, 6, 0x4e, 0x2e])), /protocol 6/);
  assert.throws(() => parsePickle(raw(0x49, '1\n')), /protocol 0 text opcode "I"/);
  assert.throws(() => parsePickle(raw(0xff)), /unknown opcode 0xff/);
  assert.equal(isPickle(Buffer.from('{"a"')), false);
});

test('every cut of a pickle is refused as truncated or malformed, never another error', () => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.constantFrom(...PROTOCOLS), fc.double({ min: 0, max: 1, noNaN: true }), (v, p, f) => {
      const full = writePickle(v as PickleInput, p);
      const cut = full.subarray(0, Math.min(full.length - 1, Math.floor(f * full.length)));
      assert.throws(
        () => parsePickle(cut),
        (e: unknown) => e instanceof BadInputError,
      );
    }),
    propertyParams(200),
  );
});

test('random bytes after PROTO give a value or a BadInputError, never a crash or a hang', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 256 }), (tail) => {
      const bytes = Buffer.concat([Buffer.from([0x80, 4]), tail]);
      try {
        parsePickle(bytes);
      } catch (e) {
        assert.ok(e instanceof BadInputError, String(e));
      }
    }),
    propertyParams(2000),
  );
});

test('the first bytes say what a pickle holds: the first key of a dict, or the class it starts with', () => {
  assert.deepEqual(pickleHead(writePickle({ segments: [] }, 4)), { protocol: 4, firstKey: 'segments' });
  assert.deepEqual(pickleHead(writePickle({ device_traces: [] }, 2)), { protocol: 2, firstKey: 'device_traces' });
  assert.deepEqual(pickleHead(raw(0x63, 'collections\nOrderedDict\n')), { protocol: 4, startsWith: 'collections.OrderedDict' });
  assert.deepEqual(pickleHead(raw(0x8c, 5, 'torch', 0x94, 0x8c, 7, 'Storage', 0x94, 0x93)), { protocol: 4, startsWith: 'torch.Storage' });
});

test('a walk refuses a container inside itself, deep nesting and a reference bomb, and always ends', () => {
  // l = []; l.append(l)
  const cyclic = parsePickle(raw(0x5d, 0x94, 0x68, 0, 0x61));
  assert.throws(
    () =>
      walkPickle(
        { a: cyclic } as PickleValue,
        () => false,
        () => {},
      ),
    /inside itself/,
  );
  let deep: PickleInput = [];
  for (let i = 0; i < 100; i++) deep = [deep];
  assert.throws(
    () =>
      walkPickle(
        parsePickle(writePickle(deep)),
        () => false,
        () => {},
      ),
    /deeper than 64/,
  );
  // five levels of a thousand references to the level below: 10^15 paths in a few kilobytes
  let bomb: PickleInput[] = [];
  for (let i = 0; i < 5; i++) bomb = new Array<PickleInput>(1000).fill(bomb);
  const bytes = writePickle({ segments: bomb });
  assert.ok(bytes.length < 20_000, `${bytes.length} bytes`);
  assert.throws(
    () =>
      walkPickle(
        parsePickle(bytes),
        () => false,
        () => {},
        { maxVisits: 100_000 },
      ),
    /so widely/,
  );
  // a shared list is handed over once per place it is used, as a JSON file repeating it would be
  const seen: string[] = [];
  const shared = ['x'];
  walkPickle(
    parsePickle(writePickle({ a: [shared, shared] })),
    (p) => p.length === 2,
    (p) => seen.push(p.join('.')),
  );
  assert.deepEqual(seen, ['a.0', 'a.1']);
});

let python: string | undefined;
try {
  python = execFileSync('python3', ['-c', 'import pickle; print(pickle.HIGHEST_PROTOCOL)'], { encoding: 'utf8' }).trim();
} catch {
  python = undefined;
}

test("CPython's own pickler: what pickle.dump writes of plain data reads as Python's json would write it", {
  skip: python ? false : 'python3 is not installed',
}, () => {
  const script = `
import pickle, json, sys, collections
shared = [{"name": "f", "filename": "train.py", "line": 12}]
v = {"segments": [{"address": 139809741864960, "total_size": 20971520, "segment_pool_id": (0, 0), "blocks": []}],
     "ints": [0, 255, 256, 65535, 65536, -1, -2**31, 2**31, 2**53 - 1, -2**40],
     "floats": [0.5, -1e300, 3.14],
     "nested": {"t": (1, (2, 3), ()), "s": "é€😀", "none": None, "b": [True, False]},
     "od": collections.OrderedDict([("z", 1), ("a", 2)]),
     "set": {7}, "frozen": frozenset([8]), "bytes": b"\\x00\\xff",
     "frames": [shared, shared], "__proto__": {"bytes": 1}, 1: "int key"}
out = {}
for p in range(2, pickle.HIGHEST_PROTOCOL + 1):
    out[p] = pickle.dumps(v, protocol=p).hex()
def plain(x):
    if isinstance(x, (bytes, bytearray)): return {"bytes": list(x)}
    if isinstance(x, (set, frozenset)): return sorted(x)
    if isinstance(x, dict): return {str(k): plain(y) for k, y in x.items()}
    if isinstance(x, (list, tuple)): return [plain(y) for y in x]
    return x
print(json.dumps({"pickles": out, "expected": plain(v)}))
`;
  const r = JSON.parse(execFileSync('python3', ['-c', script], { encoding: 'utf8' })) as { pickles: Record<string, string>; expected: unknown };
  assert.ok(Object.keys(r.pickles).length >= 4, 'protocols 2 to 5 (or more)');
  for (const [p, hex] of Object.entries(r.pickles)) {
    if (Number(p) > 5) continue;
    const v = parsePickle(Buffer.from(hex, 'hex'));
    assert.deepEqual(JSON.parse(text(v)), r.expected, `protocol ${p}`);
  }
});
