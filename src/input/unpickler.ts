/**
 * The pickle machine behind input/pickle.ts: a stack, the MARK positions in it and the memo, running the opcodes of
 * protocols 2 to 5 that plain data uses. Opcodes that would import, call or build are refused here, each by name.
 */
import { BadInputError } from '../errors.js';

/** A value read from a pickle. */
export type PickleValue = null | boolean | number | bigint | string | Uint8Array | PickleValue[] | PickleDict;
export interface PickleDict {
  [key: string]: PickleValue;
}

/** A pickle opcode or name refused because reading it would mean running code or building an object. */
export class UnsafePickleError extends BadInputError {
  /** The opcode's name (GLOBAL, REDUCE, ...). */
  readonly opcode: string;
  /** Byte offset of the opcode in the pickle. */
  readonly offset: number;
  /** `module.name` of a refused GLOBAL / STACK_GLOBAL. */
  readonly global: string | undefined;

  constructor(opcode: string, offset: number, global: string | undefined, file?: string) {
    super(
      `the pickle ${global ? `names the Python object ${global}` : `uses ${opcode}`} at byte ${offset}: gpumem reads only plain data (dicts, lists, strings, numbers) from a pickle and never imports, calls or builds anything`,
      file,
    );
    this.name = 'UnsafePickleError';
    this.opcode = opcode;
    this.offset = offset;
    this.global = global;
  }
}

const listArg = (args: PickleValue[]): PickleValue[] | undefined =>
  args.length === 0 ? [] : Array.isArray(args[0]) && args.length === 1 ? args[0] : undefined;

/** Names read as data, with what a REDUCE of their arguments gives. Nothing is looked up or called. */
const KNOWN_GLOBALS: Record<string, (args: PickleValue[]) => PickleValue | undefined> = {
  // pickle writes an OrderedDict as OrderedDict() followed by SETITEMS
  'collections.OrderedDict': (args) => (args.length === 0 ? Object.create(null) : undefined),
  // protocol 2 writes sets and bytes as calls: set([...]) and _codecs.encode(text, 'latin1')
  '__builtin__.set': (args) => listArg(args),
  'builtins.set': (args) => listArg(args),
  '__builtin__.frozenset': (args) => listArg(args),
  'builtins.frozenset': (args) => listArg(args),
  '_codecs.encode': (args) =>
    typeof args[0] === 'string' && (args[1] === 'latin1' || args[1] === 'latin-1') ? new Uint8Array(Buffer.from(args[0], 'latin1')) : undefined,
  // TorchScript's pickler (torch::jit::pickle, used by the C++ snapshot writer) tags containers and typed lists
  'torch.jit._pickle.restore_type_tag': (args) => args[0],
  'torch.jit._pickle.build_intlist': (args) => listArg(args),
  'torch.jit._pickle.build_doublelist': (args) => listArg(args),
  'torch.jit._pickle.build_boollist': (args) => listArg(args),
  'torch.jit._pickle.build_generic_list': (args) => listArg(args),
};

/** A known name on the stack, waiting for its REDUCE. */
class KnownGlobal {
  constructor(readonly name: string) {}
}
/** The MARK opcode's marker on the stack. */
const MARK = Symbol('mark');
type Slot = PickleValue | KnownGlobal | typeof MARK;

const REFUSED: Record<number, string> = {
  99: 'GLOBAL',
  147: 'STACK_GLOBAL',
  82: 'REDUCE',
  98: 'BUILD',
  105: 'INST',
  111: 'OBJ',
  129: 'NEWOBJ',
  146: 'NEWOBJ_EX',
  80: 'PERSID',
  81: 'BINPERSID',
  130: 'EXT1',
  131: 'EXT2',
  132: 'EXT4',
  151: 'NEXT_BUFFER',
  152: 'READONLY_BUFFER',
};

/** Protocol 0 and 1 text opcodes: Python 3 writes protocol 2 or later unless asked otherwise. */
const TEXT_OPCODES = new Set([0x49, 0x4c, 0x53, 0x56, 0x46, 0x70, 0x67]);

/** True when the bytes start as a pickle of protocol 2 to 5 does (PROTO n). */
export function isPickle(head: Uint8Array): boolean {
  return head.length >= 2 && head[0] === 0x80 && head[1]! >= 2 && head[1]! <= 5;
}

/** Options of {@link parsePickle}. */
export interface PickleOptions {
  /** Named in errors. */
  file?: string;
  /** Called now and then with the byte offset reached. */
  progress?: (offset: number) => void;
  /**
   * Ints beyond ±2^53 as bigint (true, the default: exact), or as the nearest number, as JSON.parse reads them
   * (false: for readers that take a pickle and a JSON file of the same data alike).
   */
  exactInts?: boolean;
}

/**
 * Reads one pickle (protocol 2 to 5) of plain data from `buf`. Bytes after its STOP are ignored, as `pickle.load`
 * ignores them.
 * @throws UnsafePickleError for an opcode or name that would run code or build an object.
 * @throws BadInputError for a truncated or malformed pickle, or one of protocol 0 or 1.
 */
export function parsePickle(buf: Uint8Array, options: PickleOptions = {}): PickleValue {
  return new Unpickler(buf, options).run();
}

/**
 * The pickle machine: a stack, the MARK positions in it, and the memo. Kept as small methods around a short loop:
 * V8 recompiles the loop each time a new opcode first runs, and one large function made that take seconds.
 */
class Unpickler {
  private readonly b: Buffer;
  private p = 0;
  /** Offset of the opcode being run, for errors. */
  private at = 0;
  private readonly stack: Slot[] = [];
  private readonly marks: number[] = [];
  /** Values, and the known names a pickle memoizes as it does any object. */
  private readonly memo: Array<PickleValue | KnownGlobal> = [];

  constructor(
    buf: Uint8Array,
    private readonly options: PickleOptions,
  ) {
    this.b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  run(): PickleValue {
    const b = this.b;
    if (!isPickle(b))
      this.fail(b[0] === 0x80 ? `protocol ${b[1] ?? '?'} (gpumem reads protocols 2 to 5)` : 'no PROTO opcode (protocol 0 and 1 pickles are not read)');
    let steps = 0;
    for (;;) {
      this.at = this.p;
      const op = this.u8();
      if (++steps === 1 << 20) {
        steps = 0;
        this.options.progress?.(this.p);
      }
      if (op === 0x2e) return this.stop();
      this.step(op);
    }
  }

  private fail(msg: string): never {
    throw new BadInputError(`not a readable pickle: ${msg} at byte ${this.at}`, this.options.file);
  }

  private need(n: number): void {
    if (this.p + n > this.b.length) this.fail(`the file ends inside an opcode (${n} more bytes needed)`);
  }

  private u8(): number {
    this.need(1);
    return this.b[this.p++]!;
  }

  private u16(): number {
    this.need(2);
    const v = this.b.readUInt16LE(this.p);
    this.p += 2;
    return v;
  }

  private u32(): number {
    this.need(4);
    const v = this.b.readUInt32LE(this.p);
    this.p += 4;
    return v;
  }

  private i32(): number {
    this.need(4);
    const v = this.b.readInt32LE(this.p);
    this.p += 4;
    return v;
  }

  /** An 8-byte length, which must fit in the file. */
  private u64(): number {
    this.need(8);
    const v = this.b.readBigUInt64LE(this.p);
    this.p += 8;
    if (v > BigInt(this.b.length)) this.fail(`a length of ${v} bytes in a file of ${this.b.length}`);
    return Number(v);
  }

  private skip(n: number): number {
    this.need(n);
    const s = this.p;
    this.p += n;
    return s;
  }

  private text(n: number, encoding: 'utf8' | 'latin1'): string {
    const s = this.skip(n);
    return this.b.toString(encoding, s, s + n);
  }

  private bytes(n: number): Uint8Array {
    const s = this.skip(n);
    return new Uint8Array(this.b.subarray(s, s + n));
  }

  /** A little-endian two's complement int of n bytes (LONG1, LONG4). */
  private long(n: number): number | bigint {
    if (n === 0) return 0;
    const s = this.skip(n);
    let v = 0n;
    for (let i = s + n - 1; i >= s; i--) v = (v << 8n) | BigInt(this.b[i]!);
    if (this.b[s + n - 1]! & 0x80) v -= 1n << BigInt(8 * n);
    return (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) || this.options.exactInts === false ? Number(v) : v;
  }

  private push(v: Slot): void {
    this.stack.push(v);
  }

  /** The top value, popped; never a MARK. */
  private pop(): PickleValue {
    const m = this.marks.length > 0 ? this.marks[this.marks.length - 1]! + 1 : 0;
    if (this.stack.length <= m) this.fail('the stack is empty');
    return this.value(this.stack.pop()!);
  }

  private popSlot(): Slot {
    if (this.stack.length === 0) this.fail('the stack is empty');
    return this.stack.pop()!;
  }

  private top(): Slot {
    if (this.stack.length === 0) this.fail('the stack is empty');
    return this.stack[this.stack.length - 1]!;
  }

  /** The values above the last MARK, removed with it. */
  private popMark(): PickleValue[] {
    const m = this.marks.pop();
    if (m === undefined) return this.fail('no MARK before this opcode');
    const items = this.stack.splice(m);
    const out: PickleValue[] = new Array(items.length - 1);
    for (let i = 1; i < items.length; i++) out[i - 1] = this.value(items[i]!);
    return out;
  }

  private value(s: Slot): PickleValue {
    if (s === MARK || s instanceof KnownGlobal) return this.fail('a value was expected');
    return s;
  }

  private key(k: PickleValue): string {
    if (typeof k === 'string') return k;
    if (typeof k === 'number' || typeof k === 'bigint') return String(k);
    if (typeof k === 'boolean') return k ? 'true' : 'false';
    if (k === null) return 'null';
    return this.fail('a dict key that is not a string, number, bool or None');
  }

  private setItems(items: PickleValue[]): void {
    const d = this.top();
    if (d === null || typeof d !== 'object' || Array.isArray(d) || d instanceof Uint8Array || d instanceof KnownGlobal)
      this.fail('SETITEM on something that is not a dict');
    if (items.length % 2 !== 0) this.fail('a dict item without its value');
    const dict = d as PickleDict;
    for (let i = 0; i < items.length; i += 2) dict[this.key(items[i]!)] = items[i + 1]!;
  }

  private append(items: PickleValue[]): void {
    const l = this.top();
    if (!Array.isArray(l)) return this.fail('APPEND to something that is not a list');
    for (const x of items) l.push(x);
  }

  private stop(): PickleValue {
    if (this.stack.length !== 1 || this.marks.length > 0) this.fail('STOP with a stack that does not hold exactly one value');
    this.options.progress?.(this.p);
    return this.value(this.stack[0]!);
  }

  private memoize(i: number): void {
    const v = this.top();
    if (v === MARK) this.fail('MEMOIZE of a MARK');
    this.memo[i] = v as PickleValue | KnownGlobal;
  }

  private get(i: number): void {
    const v = this.memo[i];
    if (v === undefined) this.fail(`memo entry ${i} was never stored`);
    this.push(v!);
  }

  /** A name: known ones become markers for their REDUCE; anything else is refused before it is used. */
  private global(opcode: string, name: string): void {
    if (!(name in KNOWN_GLOBALS)) throw new UnsafePickleError(opcode, this.at, name, this.options.file);
    this.push(new KnownGlobal(name));
  }

  private globalLine(): void {
    const b = this.b;
    const nl1 = b.indexOf(0x0a, this.p);
    const nl2 = nl1 < 0 ? -1 : b.indexOf(0x0a, nl1 + 1);
    if (nl2 < 0) this.fail('GLOBAL without its two lines');
    const name = `${b.toString('latin1', this.p, nl1)}.${b.toString('latin1', nl1 + 1, nl2)}`;
    this.p = nl2 + 1;
    this.global('GLOBAL', name);
  }

  private stackGlobal(): void {
    const n = this.pop();
    const m = this.pop();
    if (typeof m !== 'string' || typeof n !== 'string') throw new UnsafePickleError('STACK_GLOBAL', this.at, undefined, this.options.file);
    this.global('STACK_GLOBAL', `${m}.${n}`);
  }

  /** REDUCE only of a known name, interpreted as data. */
  private reduce(): void {
    const args = this.pop();
    const f = this.popSlot();
    if (!(f instanceof KnownGlobal) || !Array.isArray(args)) throw new UnsafePickleError('REDUCE', this.at, undefined, this.options.file);
    const out = KNOWN_GLOBALS[f.name]!(args);
    if (out === undefined) throw new UnsafePickleError('REDUCE', this.at, f.name, this.options.file);
    this.push(out);
  }

  private step(op: number): void {
    switch (op) {
      case 0x80: // PROTO
        this.u8();
        return;
      case 0x95: // FRAME: a hint for buffered readers
        this.u64();
        return;
      case 0x28: // MARK
        this.marks.push(this.stack.length);
        this.push(MARK);
        return;
      case 0x30: // POP (of a MARK too, as pickle.load does)
        if (this.top() === MARK) this.popMark();
        else this.pop();
        return;
      case 0x31: // POP_MARK
        this.popMark();
        return;
      case 0x32: // DUP
        this.push(this.value(this.top()));
        return;
      case 0x4e: // NONE
        return this.push(null);
      case 0x88: // NEWTRUE
        return this.push(true);
      case 0x89: // NEWFALSE
        return this.push(false);
      case 0x4a: // BININT
        return this.push(this.i32());
      case 0x4b: // BININT1
        return this.push(this.u8());
      case 0x4d: // BININT2
        return this.push(this.u16());
      case 0x8a: // LONG1
        return this.push(this.long(this.u8()));
      case 0x8b: {
        // LONG4
        const n = this.i32();
        if (n < 0 || n > 64) this.fail(`an int of ${n} bytes`);
        return this.push(this.long(n));
      }
      case 0x47: {
        // BINFLOAT (big-endian)
        const s = this.skip(8);
        return this.push(this.b.readDoubleBE(s));
      }
      case 0x8c: // SHORT_BINUNICODE
        return this.push(this.text(this.u8(), 'utf8'));
      case 0x58: // BINUNICODE
        return this.push(this.text(this.u32(), 'utf8'));
      case 0x8d: // BINUNICODE8
        return this.push(this.text(this.u64(), 'utf8'));
      case 0x55: // SHORT_BINSTRING (a Python 2 str)
        return this.push(this.text(this.u8(), 'latin1'));
      case 0x54: // BINSTRING
        return this.push(this.text(this.u32(), 'latin1'));
      case 0x43: // SHORT_BINBYTES
        return this.push(this.bytes(this.u8()));
      case 0x42: // BINBYTES
        return this.push(this.bytes(this.u32()));
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        return this.push(this.bytes(this.u64()));
      case 0x5d: // EMPTY_LIST
      case 0x29: // EMPTY_TUPLE
      case 0x8f: // EMPTY_SET
        return this.push([]);
      case 0x61: // APPEND
        return this.append([this.pop()]);
      case 0x65: // APPENDS
      case 0x90: // ADDITEMS
        return this.append(this.popMark());
      case 0x6c: // LIST
      case 0x74: // TUPLE
      case 0x91: // FROZENSET
        return this.push(this.popMark());
      case 0x85: // TUPLE1
        return this.push([this.pop()]);
      case 0x86: {
        // TUPLE2
        const y = this.pop();
        return this.push([this.pop(), y]);
      }
      case 0x87: {
        // TUPLE3
        const z = this.pop();
        const y = this.pop();
        return this.push([this.pop(), y, z]);
      }
      case 0x7d: // EMPTY_DICT
        return this.push(Object.create(null) as PickleDict);
      case 0x64: {
        // DICT
        const items = this.popMark();
        this.push(Object.create(null) as PickleDict);
        return this.setItems(items);
      }
      case 0x73: {
        // SETITEM
        const v = this.pop();
        return this.setItems([this.pop(), v]);
      }
      case 0x75: // SETITEMS
        return this.setItems(this.popMark());
      case 0x94: // MEMOIZE
        return this.memoize(this.memo.length);
      case 0x71: // BINPUT
        return this.memoize(this.u8());
      case 0x72: // LONG_BINPUT
        return this.memoize(this.u32());
      case 0x68: // BINGET
        return this.get(this.u8());
      case 0x6a: // LONG_BINGET
        return this.get(this.u32());
      case 0x63: // GLOBAL
        return this.globalLine();
      case 0x93: // STACK_GLOBAL
        return this.stackGlobal();
      case 0x52: // REDUCE
        return this.reduce();
    }
    const refused = REFUSED[op];
    if (refused) throw new UnsafePickleError(refused, this.at, undefined, this.options.file);
    if (TEXT_OPCODES.has(op)) this.fail(`a protocol 0 text opcode ${JSON.stringify(String.fromCharCode(op))}`);
    this.fail(`unknown opcode 0x${op.toString(16).padStart(2, '0')}`);
  }
}
