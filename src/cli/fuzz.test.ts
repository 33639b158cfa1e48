/**
 * The fuzz run over every reader (testing/fuzz.ts): real files from ../shared/traces and fixtures/, and files made
 * here, mutated by a seeded generator and read by the CLI in a worker. No input may crash a command, print a stack
 * trace, run past 10 s or take the worker past 1 GB. CI runs a fixed seed and a few inputs per reader;
 * `GPUMEM_FUZZ_SEED=random GPUMEM_FUZZ_RUNS=300 GPUMEM_FUZZ_BOMBS=1 node --test dist/cli/fuzz.test.js` is the long run.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { serializeSafetensors } from '../formats/safetensors.js';
import { filesLike, fuzzReader, fuzzRuns, fuzzSeed, SHARED_TRACES, type FuzzReader, type Seed } from '../testing/fuzz.js';
import { writeSnapshotFixture } from '../testing/snapshot-fixture.js';
import { naiveRun, writeRocpd, writeRocprofV1Json } from '../testing/trace-fixtures.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-fuzz-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const seed = fuzzSeed();
const runs = fuzzRuns(6);
const long = runs > 50;
/** CI mutates a few small files per reader; the long run every file up to 4 MB. */
const real = (re: RegExp, roots: Array<string | undefined> = [SHARED_TRACES, FIXTURES]): Seed[] =>
  roots.flatMap((r) => filesLike(r, re, long ? 4 << 20 : 160 << 10)).slice(0, long ? 1000 : 3);
const made = (name: string, bytes: Uint8Array | string): Seed => ({ name, bytes: Buffer.from(bytes) });
const madeFile = (name: string, write: (file: string) => void): Seed => {
  const file = join(dir, `made-${name}`);
  write(file);
  return { name: file, bytes: readFileSync(file) };
};
/** The seed's own file name after the input's number: some formats are told apart by it (rocprof CSV roles). */
const sameName = (s: Seed): string => `-${basename(s.name)}`;
const analyze = (f: string): string[] => ['analyze', f, '--json'];

const READERS: FuzzReader[] = [
  {
    name: 'kineto',
    ext: sameName,
    args: analyze,
    seeds: () => real(/(\.pt\.trace\.json|_trace\.json|kineto\.json|rank[-_]?\d*\.json|trace\.json)(\.gz)?$/),
  },
  { name: 'rocprofv3-json', ext: sameName, args: analyze, seeds: () => real(/(rocprofv3-naive\.json\.gz|908_results\.json\.gz)$/) },
  { name: 'rocprofv3-csv', ext: sameName, args: analyze, seeds: () => real(/rocprofiler-sdk.*\.csv$/) },
  {
    name: 'rocprof-v1',
    ext: sameName,
    args: analyze,
    seeds: () => [...real(/results(\.stats|\.hip_stats|\.copy_stats)?\.(json|csv)$/), madeFile('results.json', (f) => writeRocprofV1Json(f, naiveRun()))],
  },
  { name: 'sqlite', ext: sameName, args: analyze, seeds: () => [...real(/\.(sqlite|db)$/), madeFile('run.rocpd.db', (f) => writeRocpd(f, naiveRun()))] },
  { name: 'snapshot-replay', ext: sameName, args: (f) => ['pool', 'replay', f, '--json'], seeds: () => snapshots() },
  { name: 'snapshot-analyze', ext: sameName, args: analyze, seeds: () => snapshots() },
  {
    name: 'alloc-log',
    ext: sameName,
    args: (f) => ['pool', 'replay', f, '--json'],
    seeds: () => [
      ...real(/(rmm-log\.csv|rmm_log\.txt)$/),
      made(
        'log.ndjson',
        Array.from({ length: 200 }, (_, i) =>
          JSON.stringify({ t: i, action: i % 3 === 2 ? 'deallocate' : 'allocate', address: 4096 * (i % 7), bytes: 512 << (i % 9), stream: i % 2 }),
        ).join('\n'),
      ),
    ],
  },
  {
    name: 'safetensors',
    ext: sameName,
    args: (f) => ['load-weights', f, '--verify'],
    seeds: () => [
      made(
        'model.safetensors',
        serializeSafetensors(
          [
            { name: 'model.embed.weight', dtype: 'BF16', shape: [16, 8], data: new Uint8Array(256).fill(3) },
            { name: 'model.layers.0.q_proj.weight', dtype: 'F32', shape: [4, 4], data: new Uint8Array(64).fill(1) },
            { name: 'lm_head.weight', dtype: 'F16', shape: [2, 3], data: new Uint8Array(12) },
          ],
          { format: 'pt', note: 'x'.repeat(300) },
        ),
      ),
    ],
  },
  {
    name: 'safetensors-index',
    ext: () => '-model.safetensors.index.json',
    args: (f) => ['load-weights', f],
    seeds: () => [
      made(
        'model.safetensors.index.json',
        JSON.stringify({
          metadata: { total_size: 1024 },
          weight_map: { 'model.embed.weight': 'model-00001-of-00002.safetensors', lm_head: 'model-00002-of-00002.safetensors' },
        }),
      ),
    ],
  },
  {
    name: 'bench-json',
    ext: sameName,
    args: (f) => ['analyze', join(FIXTURES, 'traces/pytorch-cuda-tuned.pt.trace.json.gz'), '--from-bench', f, '--json'],
    seeds: () => real(/fixtures\/bench\/.*\.json$/, [FIXTURES]),
  },
];

/** Snapshots: the fixtures' JSON, ../shared/traces' (long run), and one written as a pickle here. */
function snapshots(): Seed[] {
  const { pickle } = writeSnapshotFixture(mkdtempSync(join(dir, 'snap-')));
  return [...real(/(snapshot\.json\.gz|\.pickle\.json\.gz)$/), { name: pickle, bytes: readFileSync(pickle) }];
}

for (const reader of READERS) {
  test(`fuzz ${reader.name}: no crash, stack trace, run past 10 s or worker past 1 GB (seed ${seed}, ${runs} mutated inputs)`, {
    timeout: 1_800_000,
  }, async () => {
    const failures = await fuzzReader(reader, { seed, runs, dir: mkdtempSync(join(dir, `${reader.name}-`)), bombs: process.env.GPUMEM_FUZZ_BOMBS === '1' });
    assert.deepEqual(
      failures.map((f) => `${f.reason} (kept: ${f.kept})`),
      [],
    );
  });
}
