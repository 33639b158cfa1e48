/**
 * Streaming JSON for untrusted, possibly huge trace files: stream-json's tokenizer (no value packing, so no string
 * is ever held whole by it) and a small walker that assembles only the values the caller selects, each within
 * limits. Deep nesting, a gigabyte-long string or a single endless line cost bounded memory and end in a
 * BadInputError naming the file.
 */
import { createRequire } from 'node:module';
import { BadInputError } from '../errors.js';
import { openInput } from './files.js';

const require = createRequire(import.meta.url);
const { parser } = require('stream-json') as { parser: (o?: object) => NodeJS.ReadWriteStream };

type Token = { name: string; value?: string };
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type PathKey = string | number;
export type JsonObject = { [k: string]: Json };

/** True for a JSON object (not an array, not null). */
export function isJsonObject(v: Json | undefined): v is JsonObject {
  return v !== null && v !== undefined && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Sets an object's member as JSON.parse does: an own property, even for the key "__proto__" (assignment would
 * set the object's prototype instead, and a trace could then lend every event inherited fields).
 */
export function setMember(o: JsonObject, key: string, v: Json): void {
  if (key === '__proto__') Object.defineProperty(o, key, { value: v, writable: true, enumerable: true, configurable: true });
  else o[key] = v;
}

/** A string cut at the length limit, marked so that nobody takes it for the whole. */
export const cutMark = (kept: string): string => `${kept}…[cut]`;

export interface JsonLimits {
  /** Deepest nesting of the whole document. */
  maxDepth: number;
  /** Longest string kept in a selected value (longer ones are cut and marked). */
  maxString: number;
  /** Deepest nesting inside a selected value. */
  maxValueDepth: number;
  /** Most characters (strings and keys) one selected value may hold: a gigabyte-large event is refused, not held. */
  maxValueChars: number;
}

export const DEFAULT_LIMITS: JsonLimits = { maxDepth: 256, maxString: 65536, maxValueDepth: 32, maxValueChars: 64 << 20 };

interface Frame {
  kind: 'object' | 'array';
  /** Array: index of the next element. */
  index: number;
  /** Object: the key of the value being read. */
  key: string;
  /** The container being assembled, when this frame is inside a selected value. */
  build: Json[] | { [k: string]: Json } | null;
  /** This frame is the root of a selected value. */
  root: boolean;
}

/**
 * Walks a JSON document and calls `onValue(path, value)` for every value whose path `select` accepts (that value
 * is assembled and not walked further). `progress(bytes)` is called as input is read.
 * @throws BadInputError for malformed or truncated JSON, or a document beyond the limits.
 */
export async function walkJson(
  file: string,
  select: (path: readonly PathKey[]) => boolean,
  onValue: (path: readonly PathKey[], value: Json) => void,
  options: { limits?: Partial<JsonLimits>; progress?: (bytes: number) => void } = {},
): Promise<void> {
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const stack: Frame[] = [];
  let rootPath: PathKey[] = [];
  let buildDepth = 0;
  /** Characters and values held by the value being assembled. */
  let buildChars = 0;
  let text = '';
  let cut = false;
  let bytes = 0;
  const fail = (msg: string): never => {
    throw new BadInputError(msg, file);
  };
  const path = (): PathKey[] => stack.map((f) => (f.kind === 'array' ? f.index : f.key));
  const top = (): Frame | undefined => stack[stack.length - 1];
  const building = (): boolean => top()?.build != null;

  /** A finished value: attach it to the container being built, or hand it over when it is a selected root. */
  const finish = (v: Json, wasRoot: boolean): void => {
    const t = top();
    if (wasRoot) onValue(rootPath, v);
    else if (t?.build) {
      if (Array.isArray(t.build)) t.build.push(v);
      else setMember(t.build, t.key, v);
    }
    if (t && t.kind === 'array') t.index++;
  };

  const startContainer = (kind: 'object' | 'array'): void => {
    if (stack.length >= limits.maxDepth) fail(`nesting deeper than ${limits.maxDepth} levels`);
    let build: Frame['build'] = null;
    let root = false;
    if (building()) {
      charge(null);
      if (++buildDepth > limits.maxValueDepth) fail(`a selected value nested deeper than ${limits.maxValueDepth} levels`);
      build = kind === 'object' ? {} : [];
    } else if (select(path())) {
      rootPath = path();
      root = true;
      buildDepth = 1;
      buildChars = 0;
      build = kind === 'object' ? {} : [];
    }
    stack.push({ kind, index: 0, key: '', build, root });
  };

  const endContainer = (): void => {
    const f = stack.pop();
    if (!f) fail('unbalanced brackets');
    if (f!.build) buildDepth--;
    finish(f!.build ?? null, f!.root);
  };

  /** Counts what the value being assembled holds (a value costs its key and, for strings, its text). */
  const charge = (v: Json): void => {
    const t = top();
    buildChars += 16 + (t?.kind === 'object' ? t.key.length : 0) + (typeof v === 'string' ? v.length : 0);
    if (buildChars > limits.maxValueChars) fail(`a selected value (${rootPath.join('.')}) holds more than ${limits.maxValueChars} characters`);
  };

  const scalar = (v: Json): void => {
    if (building()) {
      charge(v);
      return finish(v, false);
    }
    if (select(path())) {
      rootPath = path();
      return finish(v, true);
    }
    const t = top();
    if (t && t.kind === 'array') t.index++;
  };

  const handle = (t: Token): void => {
    switch (t.name) {
      case 'startObject':
        return startContainer('object');
      case 'startArray':
        return startContainer('array');
      case 'endObject':
      case 'endArray':
        return endContainer();
      case 'startKey':
        text = '';
        cut = false;
        return;
      case 'endKey': {
        const f = top();
        if (f) f.key = text;
        return;
      }
      case 'startString':
      case 'startNumber':
        text = '';
        cut = false;
        return;
      case 'stringChunk':
      case 'numberChunk':
        if (cut) return;
        text += t.value ?? '';
        if (text.length > limits.maxString) {
          text = text.slice(0, limits.maxString);
          cut = true;
        }
        return;
      case 'endString':
        return scalar(cut ? cutMark(text) : text);
      case 'endNumber':
        return scalar(cut ? Number.NaN : Number(text));
      case 'trueValue':
        return scalar(true);
      case 'falseValue':
        return scalar(false);
      case 'nullValue':
        return scalar(null);
    }
  };

  const input = openInput(file);
  const p = parser({ packValues: false, streamValues: true });
  await new Promise<void>((resolve, reject) => {
    let failed = false;
    const onError = (e: unknown): void => {
      if (failed) return;
      failed = true;
      input.unpipe(p);
      input.destroy();
      reject(e instanceof BadInputError ? e : new BadInputError(`not valid JSON, or truncated: ${(e as Error).message}`, file));
    };
    input.on('data', (c: Buffer) => {
      bytes += c.length;
      options.progress?.(bytes);
    });
    input.on('error', onError);
    p.on('error', onError);
    p.on('data', (t: Token) => {
      if (failed) return;
      try {
        handle(t);
      } catch (e) {
        onError(e);
      }
    });
    p.on('end', () => {
      if (failed) return;
      if (stack.length > 0) onError(new BadInputError('the JSON ends in the middle of a value (truncated?)', file));
      else resolve();
    });
    input.pipe(p);
  });
}
