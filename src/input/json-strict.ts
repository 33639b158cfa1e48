/**
 * A strict JSON parser for untrusted headers (safetensors, shard indexes): RFC 8259 only, every key of an object
 * unique (a repeat is refused even with the same value), nesting at most `maxDepth` deep, numbers kept as their
 * source text (u64 offsets are beyond what a double holds). Strings are sliced out of the text, not built character
 * by character, so a 100 MB header with one 99 MB string takes about as much memory and time as the text itself.
 * Errors give the offset and quote at most a short excerpt.
 */
import { quoteValue } from './quote.js';

/** A JSON number as its source text. */
export class JsonNumber {
  constructor(readonly text: string) {}
}

/** What went wrong, and where (a character offset in the text). */
export class JsonSyntaxError extends Error {
  override readonly name = 'JsonSyntaxError';
  constructor(
    message: string,
    readonly offset: number,
    /** Set when the error is a repeated key: the key. */
    readonly duplicateKey?: string,
  ) {
    super(message);
  }
}

export type StrictJson = null | boolean | string | JsonNumber | StrictJson[] | { [key: string]: StrictJson };

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// biome-ignore lint/suspicious/noControlCharactersInRegex: JSON forbids raw control characters in strings
const CONTROL = /[\u0000-\u001f]/;

/**
 * Parses `text`. Objects come back as null-prototype records whose keys keep the text's order.
 * @throws JsonSyntaxError for anything that is not one JSON value (whitespace around it allowed).
 */
export function parseStrictJson(text: string, options: { maxDepth?: number } = {}): StrictJson {
  const p = new Parser(text, options.maxDepth ?? 64);
  p.space();
  const v = p.value(0);
  p.space();
  if (p.at < text.length) p.fail('text after the JSON value');
  return v;
}

class Parser {
  at = 0;
  constructor(
    private readonly text: string,
    private readonly maxDepth: number,
  ) {}

  fail(what: string, duplicateKey?: string): never {
    const near = this.text.slice(this.at, this.at + 40);
    throw new JsonSyntaxError(`${what} at offset ${this.at}${near ? ` (near ${quoteValue(near, 40)})` : ''}`, this.at, duplicateKey);
  }

  space(): void {
    const t = this.text;
    let i = this.at;
    for (let c = t.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = t.charCodeAt(++i));
    this.at = i;
  }

  value(depth: number): StrictJson {
    const c = this.text[this.at];
    if (c === '"') return this.string();
    if (c === '{' || c === '[') {
      if (depth >= this.maxDepth) this.fail(`nested deeper than ${this.maxDepth} levels`);
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === 't' && this.text.startsWith('true', this.at)) return this.word(4, true);
    if (c === 'f' && this.text.startsWith('false', this.at)) return this.word(5, false);
    if (c === 'n' && this.text.startsWith('null', this.at)) return this.word(4, null);
    NUMBER.lastIndex = this.at;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail(c === undefined ? 'the text ends where a value was expected' : 'expected a value');
    this.at += m[0].length;
    return new JsonNumber(m[0]);
  }

  private word<T>(n: number, v: T): T {
    this.at += n;
    return v;
  }

  private object(depth: number): { [key: string]: StrictJson } {
    const out: { [key: string]: StrictJson } = Object.create(null) as { [key: string]: StrictJson };
    this.at++;
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return out;
    }
    for (;;) {
      if (this.text[this.at] !== '"') this.fail('expected a key (a string)');
      const keyAt = this.at;
      const key = this.string();
      if (Object.hasOwn(out, key)) {
        this.at = keyAt;
        this.fail(`the key ${quoteValue(key)} appears twice in one object`, key);
      }
      this.space();
      if (this.text[this.at] !== ':') this.fail("expected ':' after a key");
      this.at++;
      this.space();
      out[key] = this.value(depth);
      this.space();
      const c = this.text[this.at++];
      if (c === '}') return out;
      if (c !== ',') {
        this.at--;
        this.fail("expected ',' or '}' in an object");
      }
      this.space();
    }
  }

  private array(depth: number): StrictJson[] {
    const out: StrictJson[] = [];
    this.at++;
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.space();
      const c = this.text[this.at++];
      if (c === ']') return out;
      if (c !== ',') {
        this.at--;
        this.fail("expected ',' or ']' in an array");
      }
      this.space();
    }
  }

  /**
   * A string from the opening quote. The closing quote is found first (the first one after an even run of
   * backslashes); a string without escapes is sliced whole, one with escapes is decoded by the engine's JSON.parse,
   * so that neither costs more than the string's own length.
   */
  string(): string {
    const t = this.text;
    const start = this.at;
    let q = t.indexOf('"', start + 1);
    for (;;) {
      if (q < 0) this.fail('a string is not closed');
      let k = q - 1;
      while (t.charCodeAt(k) === 0x5c) k--;
      if ((q - 1 - k) % 2 === 0) break;
      q = t.indexOf('"', q + 1);
    }
    const raw = t.slice(start + 1, q);
    this.at = q + 1;
    if (raw.indexOf('\\') < 0) {
      const c = raw.search(CONTROL);
      if (c < 0) return raw;
      this.at = start + 1 + c;
      this.fail('a raw control character in a string');
    }
    try {
      return JSON.parse(t.slice(start, q + 1)) as string;
    } catch {
      this.at = start;
      return this.fail('a bad escape or a raw control character in a string');
    }
  }
}
