/**
 * The fast reader for JSON shaped like a profiler trace: an object (or array) whose big members are arrays of small
 * elements, as Kineto's `traceEvents`. Bytes are scanned for element boundaries (string and escape aware), a MiB
 * of whole elements are cut at a time and handed to V8's JSON.parse, and each element is offered to `select` /
 * `onValue` exactly as walkJson does. Memory is bounded by the chunk size and the largest element, not by the file.
 * Gzip is inflated by zlib on libuv's thread pool, off the main thread.
 *
 * The limits are walkJson's: nesting depth, string length (longer strings are cut to the limit and marked), and
 * the size of one selected value. Members that are not arrays (deviceProperties, metadata) are parsed whole, within
 * the same size limit. walkJson stays the careful path for files whose values are not small elements.
 */
import { isAscii } from 'node:buffer';
import { BadInputError } from '../errors.js';
import { openInput } from './files.js';
import { cutMark, DEFAULT_LIMITS, setMember, type Json, type JsonLimits, type PathKey } from './json-stream.js';

/** Bytes of whole elements parsed at once. */
export const CHUNK_BYTES = 1 << 20;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * Walks a JSON document like walkJson, parsing arrays in chunks of whole elements.
 * @throws BadInputError for malformed or truncated JSON, or a document beyond the limits.
 */
export async function walkJsonChunked(
  file: string,
  select: (path: readonly PathKey[]) => boolean,
  onValue: (path: readonly PathKey[], value: Json) => void,
  options: {
    limits?: Partial<JsonLimits>;
    progress?: (bytes: number) => void;
    pieceBytes?: number;
    chunkBytes?: number;
    /**
     * True for an array (by its path) whose elements are themselves arrays of small elements, as a snapshot's
     * `device_traces` (one array of events per device): those inner arrays are cut into chunks too, not parsed whole.
     */
    descend?: (path: readonly PathKey[]) => boolean;
  } = {},
): Promise<void> {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const chunkBytes = options.chunkBytes ?? CHUNK_BYTES;
  const fail = (msg: string): never => {
    throw new BadInputError(msg, file);
  };

  /** Offers a parsed value to the caller: a selected path gets it whole (strings cut), others are walked into. */
  const dispatch = (path: PathKey[], v: Json, checks: { long: boolean; deep: boolean }): void => {
    if (select(path)) {
      if (checks.deep && valueDepth(v) > limits.maxValueDepth) fail(`a selected value nested deeper than ${limits.maxValueDepth} levels`);
      onValue(path, checks.long ? cutStrings(v, limits.maxString) : v);
      return;
    }
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) dispatch([...path, i], v[i]!, checks);
    else if (v !== null && typeof v === 'object') for (const k of Object.keys(v)) dispatch([...path, cutKey(k, limits.maxString)], v[k]!, checks);
  };

  /** What the scanner saw since the last flush, for dispatch; reset. */
  const takeChecks = (): { long: boolean; deep: boolean } => {
    const c = { long: longString, deep };
    longString = false;
    deep = false;
    return c;
  };

  const parse = (text: string): Json => {
    try {
      return JSON.parse(text) as Json;
    } catch (e) {
      return fail(`not valid JSON, or truncated: ${(e as Error).message}`);
    }
  };

  // The scanner: depth of open containers, string state, and what the bytes since `mark` belong to.
  let depth = 0;
  let inString = false;
  let escapedNext = false;
  /** Length in bytes of the string being scanned, and whether any string since the last flush was too long. */
  let stringBytes = 0;
  let longString = false;
  /** An element (or value) since the last flush nests deeper than the value depth limit: its depth is checked. */
  let deep = false;
  /** 'start': before the root value; 'members': inside the root object; 'array': cutting elements; 'value': one member's value. */
  let mode: 'start' | 'members' | 'array' | 'value' | 'end' = 'start';
  /** In the root object: what the scanner expects next. */
  let expect: 'key' | 'colon' | 'value' | 'comma' = 'key';
  let key = '';
  /** Depth at which the array being cut holds its elements. */
  let arrayDepth = 0;
  let prefix: PathKey[] = [];
  let nextIndex = 0;
  /** Bytes held for the elements or value being collected (earlier buffers' tails, then the current buffer from `mark`). */
  let held: Buffer[] = [];
  let heldBytes = 0;
  let mark = 0;
  /** Index of the element being scanned in its array. */
  let scanIndex = 0;
  /** Where the element being scanned began (bytes from the start of the document), for the value size limit. */
  let elementStart = 0;
  /** Bytes of the document scanned before the current buffer. */
  let total = 0;
  /** The array being cut holds arrays to cut in turn (options.descend), and the next byte may start one. */
  let descending = false;
  let elementFresh = false;
  /** The arrays descended from, innermost last: where to go on when the inner array ends. */
  const outer: Array<{ prefix: PathKey[]; index: number }> = [];

  const OPEN = Buffer.from('[');
  const CLOSE = Buffer.from(']');
  /** The bytes held and those of `b` up to `end`, as text; `bracket` wraps them in [ ] (one copy, one decode). */
  const collected = (b: Buffer, end: number, bracket = false): string => {
    const parts = [...held, b.subarray(mark, end)];
    held = [];
    heldBytes = 0;
    const whole = Buffer.concat(bracket ? [OPEN, ...parts, CLOSE] : parts);
    // ASCII (most traces) decodes many times faster than UTF-8
    return whole.toString(isAscii(whole) ? 'latin1' : 'utf8');
  };

  /** Parses the whole elements collected so far and hands them over. */
  const flushElements = (b: Buffer, end: number): void => {
    const text = collected(b, end, true);
    const checks = takeChecks();
    const items = parse(text) as Json[];
    for (const item of items) dispatch([...prefix, nextIndex++], item, checks);
  };

  /**
   * An element nests deeper than a selected value may: refused at once when it is selected (as walkJson does), and
   * its depth checked value by value when it is not (a selected value may lie inside it).
   */
  const tooDeep = (path: PathKey[]): void => {
    if (select(path)) fail(`a selected value nested deeper than ${limits.maxValueDepth} levels`);
    deep = true;
  };

  /**
   * The index of the quote that closes the string being scanned, from `from`; -1 when the string goes on past the
   * buffer (then `escapedNext` says whether the next buffer's first byte is escaped).
   */
  const closingQuote = (b: Buffer, from: number): number => {
    let j = from;
    let escapedAtJ = escapedNext;
    escapedNext = false;
    for (;;) {
      const q = b.indexOf(QUOTE, j);
      const end = q < 0 ? b.length : q;
      let k = end - 1;
      while (k >= j && b[k] === BACKSLASH) k--;
      let run = end - 1 - k;
      if (k < j && escapedAtJ) run--; // the run starts with a byte escaped by the previous buffer's backslash
      if (k < j && escapedAtJ && run < 0) run = 0;
      if (q < 0) {
        escapedNext = (run & 1) === 1 || (run === 0 && end === j && escapedAtJ);
        return -1;
      }
      if ((run & 1) === 0 && !(q === j && escapedAtJ)) return q;
      j = q + 1;
      escapedAtJ = false;
    }
  };

  /** Refuses an element (or member value) that has grown past the size limit by `at`. */
  const elementTooLarge = (at: number): void => {
    if (at - elementStart > limits.maxValueChars)
      fail(`a selected value (${(mode === 'array' ? [...prefix, scanIndex] : [key]).join('.')}) holds more than ${limits.maxValueChars} characters`);
  };

  /** Starts cutting the array at `prefix` whose first element may start at `at` in the current buffer. */
  const enterArray = (at: number): void => {
    nextIndex = 0;
    scanIndex = 0;
    elementStart = total + at;
    mark = at;
    descending = options.descend?.(prefix) ?? false;
    elementFresh = descending;
  };

  const scan = (b: Buffer): void => {
    const n = b.length;
    let i = 0;
    mark = 0;
    while (i < n) {
      if (inString) {
        // jump to the closing quote: the next quote not escaped by an odd run of backslashes
        const q = closingQuote(b, i);
        if (q < 0) {
          stringBytes += n - i;
          break;
        }
        stringBytes += q - i;
        i = q + 1;
        inString = false;
        if (stringBytes > limits.maxString) longString = true;
        if (mode === 'members' && expect === 'key') {
          key = JSON.parse(collected(b, i)) as string;
          if (key.length > limits.maxString) key = key.slice(0, limits.maxString);
          expect = 'colon';
        }
        continue;
      }
      const c = b[i]!;
      switch (mode) {
        case 'array':
          if (elementFresh && !isSpace(c)) {
            elementFresh = false;
            if (c === OPEN_ARRAY) {
              // an element of an array that holds arrays to cut: cut this one's elements in turn
              flushElements(b, i);
              outer.push({ prefix, index: scanIndex });
              prefix = [...prefix, scanIndex];
              depth++;
              arrayDepth++;
              enterArray(i + 1);
              i++;
              continue;
            }
          }
          if (c === QUOTE) {
            inString = true;
            stringBytes = 0;
          } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            if (++depth - arrayDepth > limits.maxValueDepth) tooDeep([...prefix, scanIndex]);
            if (depth > limits.maxDepth) fail(`nesting deeper than ${limits.maxDepth} levels`);
          } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
            if (--depth < arrayDepth) {
              // the array ends: parse what is left, then go back to the array it is an element of, or to the root
              // object's members (or the end)
              flushElements(b, i);
              const up = outer.pop();
              if (up) {
                prefix = up.prefix;
                arrayDepth--;
                nextIndex = up.index + 1;
                scanIndex = up.index;
                descending = true;
                mark = i + 1;
                elementStart = total + i + 1;
              } else {
                mode = arrayDepth === 1 ? 'end' : 'members';
                expect = 'comma';
              }
            }
          } else if (c === COMMA && depth === arrayDepth) {
            elementTooLarge(total + i);
            elementStart = total + i + 1;
            scanIndex++;
            // an array of arrays is flushed at every comma, so that an inner array starts with nothing held
            if (descending || heldBytes + (i - mark) >= chunkBytes) {
              flushElements(b, i);
              mark = i + 1;
            }
            elementFresh = descending;
          }
          i++;
          continue;
        case 'value':
          // one member's value that is not an array: collected whole, within the size limit
          if (c === QUOTE) {
            inString = true;
            stringBytes = 0;
          } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            if (++depth - 1 > limits.maxValueDepth) tooDeep([key]);
            if (depth > limits.maxDepth) fail(`nesting deeper than ${limits.maxDepth} levels`);
          } else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY || c === COMMA) && depth === 1) {
            dispatch([key], parse(collected(b, i)), takeChecks());
            mode = 'members';
            expect = 'comma';
            continue; // the comma or brace is the root object's: scan it there
          } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
          i++;
          continue;
        case 'members':
          i++;
          if (isSpace(c)) continue;
          if (expect === 'key') {
            if (c === QUOTE) {
              inString = true;
              stringBytes = 0;
              mark = i - 1;
            } else if (c === CLOSE_OBJECT && key === '') {
              depth--;
              mode = 'end';
            } else fail(`not valid JSON: expected a key at byte ${total + i - 1}`);
          } else if (expect === 'colon') {
            if (c !== COLON) fail(`not valid JSON: expected ':' at byte ${total + i - 1}`);
            expect = 'value';
          } else if (expect === 'value') {
            if (c === OPEN_ARRAY) {
              depth++;
              mode = 'array';
              arrayDepth = 2;
              prefix = [key];
              enterArray(i);
            } else {
              mode = 'value';
              elementStart = total + i - 1;
              mark = i - 1;
              i--; // scan the value's first byte in 'value' mode
            }
          } else if (c === COMMA) expect = 'key';
          else if (c === CLOSE_OBJECT) {
            depth--;
            mode = 'end';
          } else fail(`not valid JSON: expected ',' or '}' at byte ${total + i - 1}`);
          continue;
        case 'start':
          i++;
          if (isSpace(c) || c === 0xef || c === 0xbb || c === 0xbf) continue; // whitespace, UTF-8 byte order mark
          depth = 1;
          if (c === OPEN_OBJECT) {
            mode = 'members';
            expect = 'key';
          } else if (c === OPEN_ARRAY) {
            mode = 'array';
            arrayDepth = 1;
            prefix = [];
            enterArray(i);
          } else fail('not valid JSON: the document is neither an object nor an array');
          continue;
        case 'end':
          i++;
          if (!isSpace(c)) fail(`not valid JSON: unexpected data after the end at byte ${total + i - 1}`);
          continue;
      }
    }
    if (mode === 'array' || mode === 'value' || (mode === 'members' && inString)) {
      held.push(b.subarray(mark));
      heldBytes += n - mark;
    }
    if (mode === 'array' || mode === 'value') elementTooLarge(total + n);
    total += n;
  };

  const input = openInput(file, options.pieceBytes);
  try {
    for await (const chunk of input) {
      scan(chunk as Buffer);
      options.progress?.(total);
    }
  } catch (e) {
    input.destroy();
    if (e instanceof BadInputError) throw e;
    return fail(`not valid JSON, or truncated: ${(e as Error).message}`);
  }
  if ((mode as string) !== 'end') fail('the JSON ends in the middle of a value (truncated?)');
}

/** How deep a parsed value nests (a scalar is 0). */
function valueDepth(v: Json): number {
  if (v === null || typeof v !== 'object') return 0;
  let d = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') d = Math.max(d, valueDepth(x));
  return d + 1;
}

function cutKey(k: string, max: number): string {
  return k.length > max ? k.slice(0, max) : k;
}

/** The value with strings longer than `max` cut to it and marked, as walkJson keeps them. */
function cutStrings(v: Json, max: number): Json {
  if (typeof v === 'string') return v.length > max ? cutMark(v.slice(0, max)) : v;
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => cutStrings(x, max));
  const out: { [k: string]: Json } = {};
  for (const k of Object.keys(v)) setMember(out, cutKey(k, max), cutStrings(v[k]!, max));
  return out;
}
