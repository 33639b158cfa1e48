/**
 * A fuzz run over gpumem's readers: real files (../shared/traces, fixtures/) and files made here, mutated by a seeded
 * generator, each read by the real CLI in a worker process (fuzz-worker.ts) under watch. An input fails when the
 * command ends other than 0 or 2 (a crash, an untyped error), prints a stack trace, runs past 10 s, or takes the
 * worker past 1 GB of resident memory. The seed is fixed (DEFAULT_SEED) unless GPUMEM_FUZZ_SEED says otherwise
 * (`random`, or a number to replay a run); GPUMEM_FUZZ_RUNS sets the mutated inputs per reader (a few by default,
 * so that CI spends seconds per reader; hundreds on demand), and GPUMEM_FUZZ_BOMBS=1 adds gzip bombs past the
 * inflation cap. Failing inputs are kept, and their paths given, to replay them.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import { DEFAULT_SEED } from './property.js';

/** What the worker reports of one input. */
export interface FuzzOutcome {
  i: number;
  code: number;
  /** The worker's peak resident memory while it read the input, in KiB. */
  maxRssKiB: number;
  /** The first lines of what the command printed on stderr. */
  err: string;
}

/** An input that failed, and why; `kept` is a copy of it to replay. */
export interface FuzzFailure {
  input: string;
  kept: string;
  reason: string;
}

/** One reader: how the CLI reads a file with it, and the files its inputs are mutated from. */
export interface FuzzReader {
  name: string;
  /** The file's extension (gzip files keep .gz). */
  ext: (seed: Seed) => string;
  args: (file: string) => string[];
  /** Real and made files to mutate; at least one. */
  seeds: () => Seed[];
}

export interface Seed {
  name: string;
  bytes: Buffer;
}

/** The seed in force: GPUMEM_FUZZ_SEED (a number, or `random`), else DEFAULT_SEED. */
export function fuzzSeed(): number {
  const s = process.env.GPUMEM_FUZZ_SEED;
  if (s === undefined || s === '') return DEFAULT_SEED;
  if (s === 'random') return Math.floor(Math.random() * 2 ** 31);
  const n = Number(s);
  if (!Number.isInteger(n)) throw new Error(`GPUMEM_FUZZ_SEED must be an integer or "random", not ${s}`);
  return n;
}

/** Mutated inputs per reader: GPUMEM_FUZZ_RUNS, else `runs`. */
export function fuzzRuns(runs: number): number {
  const r = process.env.GPUMEM_FUZZ_RUNS;
  if (r === undefined || r === '') return runs;
  const n = Number(r);
  if (!Number.isInteger(n) || n < 1) throw new Error(`GPUMEM_FUZZ_RUNS must be a positive integer, not ${r}`);
  return n;
}

/** A seeded generator of numbers in [0, 1) (mulberry32). */
export function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Tokens that break readers: quotes, brackets, huge and negative numbers, keys a prototype answers to, long runs. */
const TOKENS = [
  '"',
  '\\',
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '-1',
  '-5',
  '0.5',
  '1e400',
  '-1e400',
  'NaN',
  'null',
  'true',
  '18446744073709551616',
  '9007199254740993',
  '"__proto__"',
  '"constructor"',
  '\u0000',
  '\x1b]0;x\x07',
  '\ud800',
  '0x',
  '\n',
  '\r\n',
];

const isGzip = (b: Buffer): boolean => b.length > 2 && b[0] === 0x1f && b[1] === 0x8b;

/** One mutation of `bytes`: a flip, a cut, a copied or removed slice, a hostile token, a long run, a changed number. */
export function mutate(bytes: Buffer, rnd: () => number): Buffer {
  const n = bytes.length;
  const at = Math.floor(rnd() * (n + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  switch (Math.floor(rnd() * 8)) {
    case 0: {
      const out = Buffer.from(bytes);
      for (let k = 0; k < 1 + Math.floor(rnd() * 8) && n > 0; k++) out[Math.floor(rnd() * n)] = Math.floor(rnd() * 256);
      return out;
    }
    case 1:
      return bytes.subarray(0, at);
    case 2: {
      const len = Math.min(n - at, Math.floor(rnd() * 4096));
      return Buffer.concat([bytes.subarray(0, at + len), bytes.subarray(at, at + len), bytes.subarray(at + len)]);
    }
    case 3:
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(Math.min(n, at + Math.floor(rnd() * 4096)))]);
    case 4:
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(pick(TOKENS)), bytes.subarray(at)]);
    case 5: {
      const run = pick(['[', '{"a":', 'A', '\\\\', '0', '[{"x":1},', ' ']).repeat(1 + Math.floor(rnd() * 200_000));
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(run), bytes.subarray(at)]);
    }
    case 6: {
      // a number of the file made huge, negative, fractional or not a number
      const text = bytes.toString('latin1');
      const re = /-?\d+(\.\d+)?/g;
      const found = [...text.slice(at, at + 65536).matchAll(re)];
      if (found.length === 0) return Buffer.concat([bytes, Buffer.from(pick(TOKENS))]);
      const m = pick(found);
      const start = at + m.index;
      return Buffer.concat([
        bytes.subarray(0, start),
        Buffer.from(pick(['-1', '0.5', '1e308', '18446744073709551615', '-9007199254740993', '0', '"7"'])),
        bytes.subarray(start + m[0].length),
      ]);
    }
    default: {
      // a whole line or element (up to 4 KiB) repeated many times: counts and lengths far past the file's own
      const nl = bytes.indexOf(0x0a, at);
      const end = Math.min(nl < 0 ? n : nl + 1, at + 4096);
      const piece = bytes.subarray(at, end);
      return Buffer.concat([bytes.subarray(0, at), ...Array<Buffer>(1 + Math.floor(rnd() * 2000)).fill(piece), bytes.subarray(at)]);
    }
  }
}

/** The largest input made: the bound the readers are held to is for inputs under 100 MB. */
export const FUZZ_MAX_INPUT = 96 * 2 ** 20;

/** A mutated input: gzip seeds are mutated inside (and re-gzipped) most of the time, so that the parser sees it. */
export function mutatedInput(seed: Seed, rnd: () => number): Buffer {
  const gz = isGzip(seed.bytes);
  const inner = gz && rnd() < 0.8;
  let b = inner ? gunzipSync(seed.bytes) : seed.bytes;
  for (let k = 0; k < 1 + Math.floor(rnd() * 3); k++) b = mutate(b, rnd).subarray(0, FUZZ_MAX_INPUT);
  return inner ? gzipSync(b, { level: 1 }).subarray(0, FUZZ_MAX_INPUT) : b;
}

/** A gzip bomb of `seed`'s own content repeated (gzip members concatenated): a few MB on disk, past the cap inflated. */
export function bombOf(seed: Seed, inflatedBytes: number): Buffer {
  const one = isGzip(seed.bytes) ? gunzipSync(seed.bytes) : seed.bytes;
  // the content repeated to at least 4 MiB before it is compressed, so that the bomb stays small on disk
  const text = Buffer.concat(Array<Buffer>(Math.ceil((4 << 20) / Math.max(1, one.length))).fill(one));
  const member = gzipSync(text, { level: 9 });
  return Buffer.concat(Array<Buffer>(Math.ceil(inflatedBytes / text.length)).fill(member));
}

/** ../shared/traces beside the checkout (or beside the folder of worktrees), if present. */
export const SHARED_TRACES = ['../../../shared/traces/', '../../../../shared/traces/'].map((p) => fileURLToPath(new URL(p, import.meta.url))).find(existsSync);

/** Files under `dir` whose name matches, up to `maxBytes` each, in name order. */
export function filesLike(dir: string | undefined, re: RegExp, maxBytes: number): Seed[] {
  if (!dir || !existsSync(dir)) return [];
  const out: Seed[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && re.test(p) && st.size > 0 && st.size <= maxBytes) out.push({ name: p, bytes: readFileSync(p) });
    }
  };
  walk(dir);
  return out;
}

const WORKER = fileURLToPath(new URL('./fuzz-worker.js', import.meta.url));
/** A run longer than this fails (the issue's bound for inputs under 100 MB). */
export const FUZZ_DEADLINE_MS = 10_000;
/** Resident memory past this fails. */
export const FUZZ_MAX_RSS_KIB = 1024 * 1024;

/**
 * Runs `reader` over `runs` mutated inputs (and bombs when asked), in one worker at a time; answers the failures.
 * `dir` holds the inputs (a failing one is also copied to the system's temporary folder, to replay).
 */
export async function fuzzReader(reader: FuzzReader, options: { seed: number; runs: number; dir: string; bombs?: boolean }): Promise<FuzzFailure[]> {
  const rnd = generator(options.seed ^ hash(reader.name));
  const seeds = reader.seeds();
  if (seeds.length === 0) throw new Error(`${reader.name}: no file to mutate`);
  const inputs: string[] = [];
  const write = (seed: Seed, bytes: Buffer, tag: string): void => {
    const file = join(options.dir, `${reader.name}-${inputs.length}-${tag}${reader.ext({ name: seed.name, bytes })}`);
    writeFileSync(file, bytes);
    inputs.push(file);
  };
  for (const s of seeds) write(s, s.bytes, 'seed');
  for (let k = 0; k < options.runs; k++) {
    const s = seeds[Math.floor(rnd() * seeds.length)]!;
    write(s, mutatedInput(s, rnd), 'mut');
  }
  if (options.bombs) for (const s of seeds.slice(0, 2)) write(s, bombOf(s, 300 * 2 ** 20), 'bomb');
  const failures: FuzzFailure[] = [];
  let next = 0;
  while (next < inputs.length) next = await runWorker(reader, inputs, next, failures, options.seed);
  return failures;
}

/** Runs inputs from `from` in one worker until they are done or one hangs (the worker is then killed); answers where to go on. */
function runWorker(reader: FuzzReader, inputs: readonly string[], from: number, failures: FuzzFailure[], seed: number): Promise<number> {
  const jobs = join(inputs[0]!, '..', `${reader.name}-jobs-${from}.json`);
  writeFileSync(jobs, JSON.stringify(inputs.slice(from).map((f) => reader.args(f))));
  const child = spawn(process.execPath, ['--max-old-space-size=1536', WORKER, jobs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GPUMEM_BACKEND: 'host' },
  });
  const fail = (i: number, reason: string): void => {
    const input = inputs[i]!;
    const keptDir = join(tmpdir(), 'gpumem-fuzz-failures');
    mkdirSync(keptDir, { recursive: true });
    const kept = join(keptDir, `seed-${seed}-${input.split('/').pop()}`);
    copyFileSync(input, kept);
    failures.push({ input, kept, reason: `${reader.args(kept).join(' ')}: ${reason}` });
  };
  return new Promise((resolve) => {
    let current = from;
    let timer: NodeJS.Timeout | undefined;
    let buffered = '';
    let stderr = '';
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        fail(current, `still running after ${FUZZ_DEADLINE_MS / 1000} s`);
        child.kill('SIGKILL');
      }, FUZZ_DEADLINE_MS);
    };
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        const m = JSON.parse(line) as { start: number } | FuzzOutcome;
        if ('start' in m) {
          current = from + m.start;
          arm();
          continue;
        }
        const o = m as FuzzOutcome;
        const i = from + o.i;
        if (o.code !== 0 && o.code !== 2) fail(i, `exit code ${o.code}: ${o.err}`);
        else if (/\n\s+at .*\(.*:\d+:\d+\)/.test(o.err)) fail(i, `a stack trace: ${o.err}`);
        if (o.maxRssKiB > FUZZ_MAX_RSS_KIB) fail(i, `resident memory reached ${Math.round(o.maxRssKiB / 1024)} MiB`);
        current = i + 1;
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const timedOut = failures.some((f) => f.input === inputs[current]);
      if (current < inputs.length && !timedOut) fail(current, `the worker died (${signal ?? `exit ${code}`}): ${stderr.slice(-1000)}`);
      resolve(current < inputs.length ? current + 1 : inputs.length);
    });
  });
}

/** A reader's name as a number, so that each reader gets its own sequence from one seed. */
function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}
