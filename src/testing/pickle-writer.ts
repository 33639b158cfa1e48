/**
 * A pickle writer for tests, after the documented format (Python's Lib/pickletools.py, PEP 307, 3154 and 574): plain
 * values as CPython's pickler writes them for protocols 2 to 5 (containers in batches of 1000 after MARK, the memo
 * for every container and string, a reference to a container written once for each later use), so that readers are
 * tested on the structure a real `pickle.dump` produces. Only for tests: nothing here is shipped.
 */

/** A Python tuple (a JS array is written as a list). */
export class Tuple {
  constructor(readonly items: PickleInput[]) {}
}

/** Opcodes written as they are, to build a pickle that plain values cannot express (a GLOBAL, a REDUCE...). */
export class Raw {
  constructor(readonly bytes: Uint8Array) {}
}

export type PickleInput = null | boolean | number | bigint | string | Uint8Array | Tuple | Raw | PickleInput[] | { [key: string]: PickleInput };

const BATCH = 1000;

/** Bytes of `value` pickled with `protocol` (2 to 5). Numbers that are not integers are written as floats. */
export function writePickle(value: PickleInput, protocol: 2 | 3 | 4 | 5 = 4): Buffer {
  const out: number[] = [];
  const memo = new Map<unknown, number>();
  const byte = (...b: number[]): void => {
    for (const x of b) out.push(x);
  };
  const bytes = (b: Uint8Array): void => {
    for (const x of b) out.push(x);
  };
  const le = (v: number, n: number): void => {
    for (let i = 0; i < n; i++) byte(Math.floor(v / 2 ** (8 * i)) & 0xff);
  };
  const put = (key: unknown): void => {
    const i = memo.size;
    memo.set(key, i);
    if (protocol >= 4) byte(0x94);
    else if (i < 256) byte(0x71, i);
    else {
      byte(0x72);
      le(i, 4);
    }
  };
  const get = (key: unknown): boolean => {
    const i = memo.get(key);
    if (i === undefined) return false;
    if (i < 256) byte(0x68, i);
    else {
      byte(0x6a);
      le(i, 4);
    }
    return true;
  };
  const int = (v: bigint): void => {
    if (v >= 0n && v < 256n) return byte(0x4b, Number(v));
    if (v >= 0n && v < 65536n) {
      byte(0x4d);
      return le(Number(v), 2);
    }
    if (v >= -(2n ** 31n) && v < 2n ** 31n) {
      byte(0x4a);
      return le(Number(BigInt.asUintN(32, v)), 4);
    }
    const bytes: number[] = [];
    let x = v;
    // two's complement, little-endian, as few bytes as keep the sign
    for (;;) {
      bytes.push(Number(BigInt.asUintN(8, x)));
      x >>= 8n;
      const top = bytes[bytes.length - 1]! & 0x80;
      if ((x === 0n && !top) || (x === -1n && top)) break;
    }
    byte(0x8a, bytes.length, ...bytes);
  };
  const batches = (items: Array<() => void>, one: number, many: number): void => {
    for (let i = 0; i < items.length; i += BATCH) {
      const part = items.slice(i, i + BATCH);
      if (part.length === 1) {
        part[0]!();
        byte(one);
      } else {
        byte(0x28);
        for (const f of part) f();
        byte(many);
      }
    }
  };
  const write = (v: PickleInput): void => {
    if (v === null) return byte(0x4e);
    if (v === true) return byte(0x88);
    if (v === false) return byte(0x89);
    if (typeof v === 'bigint') return int(v);
    if (typeof v === 'number') {
      if (Number.isInteger(v)) return int(BigInt(v));
      byte(0x47);
      const b = Buffer.alloc(8);
      b.writeDoubleBE(v);
      return bytes(b);
    }
    if (v instanceof Raw) return bytes(v.bytes);
    if (typeof v === 'string') {
      if (get(`s:${v}`)) return;
      const b = Buffer.from(v, 'utf8');
      if (protocol >= 4 && b.length < 256) byte(0x8c, b.length);
      else {
        byte(0x58);
        le(b.length, 4);
      }
      bytes(b);
      return put(`s:${v}`);
    }
    if (get(v)) return;
    if (v instanceof Uint8Array) {
      if (v.length < 256) byte(0x43, v.length);
      else {
        byte(0x42);
        le(v.length, 4);
      }
      bytes(v);
      return put(v);
    }
    if (v instanceof Tuple) {
      const n = v.items.length;
      if (n === 0) return byte(0x29);
      if (n <= 3) {
        for (const x of v.items) write(x);
        byte(0x84 + n);
      } else {
        byte(0x28);
        for (const x of v.items) write(x);
        byte(0x74);
      }
      return put(v);
    }
    if (Array.isArray(v)) {
      byte(0x5d);
      put(v);
      return batches(
        v.map((x) => () => write(x)),
        0x61,
        0x65,
      );
    }
    byte(0x7d);
    put(v);
    batches(
      Object.entries(v).map(([k, x]) => () => {
        write(k);
        write(x);
      }),
      0x73,
      0x75,
    );
  };
  write(value);
  const body = Buffer.from([...out, 0x2e]);
  if (protocol < 4) return Buffer.concat([Buffer.from([0x80, protocol]), body]);
  const frame = Buffer.alloc(9);
  frame[0] = 0x95;
  frame.writeBigUInt64LE(BigInt(body.length), 1);
  return Buffer.concat([Buffer.from([0x80, protocol]), frame, body]);
}
