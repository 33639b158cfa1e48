/**
 * The package as a user installs it: what `npm pack` ships, the subpath entries importing no native addon, and the
 * published type declarations compiling in a strict consumer (skipLibCheck off), internals stripped.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));

test('npm pack ships the library, its types and docs, and no tests, test cases or harness', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const files = (JSON.parse(out) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path);
  for (const entry of [
    'dist/index.js',
    'dist/index.d.ts',
    'dist/cli.js',
    'dist/plan/index.js',
    'dist/analyze/index.js',
    'dist/pool/index.js',
    'dist/replay/index.js',
    'README.md',
    'LICENSE',
    'package.json',
  ]) {
    assert.ok(files.includes(entry), `${entry} is packed`);
  }
  const unwanted = files.filter((f) => /\.test\.|\.case\.|dist\/testing\/|fixtures\/|docs\//.test(f));
  assert.deepEqual(unwanted, []);
});

test('gpumem/plan, gpumem/analyze, gpumem/pool, gpumem/replay and the main entry import without loading koffi', () => {
  const script = `
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    const out = {};
    for (const entry of ['gpumem/plan', 'gpumem/analyze', 'gpumem/pool', 'gpumem/replay', 'gpumem']) {
      const m = await import(entry);
      out[entry] = { exports: Object.keys(m).length, koffi: Object.keys(require.cache).some((k) => k.includes('/koffi/')) };
    }
    const { openRuntime } = await import('gpumem');
    openRuntime({ backend: 'host' })[Symbol.dispose]();
    out.host = { koffi: Object.keys(require.cache).some((k) => k.includes('/koffi/')) };
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const seen = JSON.parse(r.stdout) as Record<string, { exports?: number; koffi: boolean }>;
  for (const [entry, s] of Object.entries(seen)) {
    assert.equal(s.koffi, false, `${entry} loaded koffi`);
    if (s.exports !== undefined) assert.ok(s.exports > 3, `${entry} exports its API`);
  }
});

test('the published declarations compile in a strict consumer, without the internal members', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-consumer-'));
  try {
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(root, join(dir, 'node_modules', 'gpumem'));
    symlinkSync(join(root, 'node_modules', '@types'), join(dir, 'node_modules', '@types'));
    symlinkSync(join(root, 'node_modules', 'koffi'), join(dir, 'node_modules', 'koffi'));
    writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
    writeFileSync(
      join(dir, 'use.ts'),
      `import { openRuntime, CachingPool, DeviceResource, StatisticsAdaptor, type Runtime } from 'gpumem';
import { plan, catalogueModel, machineFromCatalogue, type PlanResult } from 'gpumem/plan';
import { analyzeFiles, type AnalyzeResult } from 'gpumem/analyze';
import { SimulatedResource } from 'gpumem/pool';
import { replay } from 'gpumem/replay';
using rt: Runtime = openRuntime({ backend: 'host' });
const pool = new StatisticsAdaptor(new CachingPool(new DeviceResource(rt.device(0))));
// @ts-expect-error internal members are not part of the published types
rt.adopt;
export const used: unknown[] = [pool, plan, catalogueModel, machineFromCatalogue, analyzeFiles, replay, SimulatedResource];
export type T = [PlanResult, AnalyzeResult];
`,
    );
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2023', 'ESNext.Disposable'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: ['node'],
        },
        files: ['use.ts'],
      }),
    );
    const r = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README's library example is examples/quickstart.mjs, and it runs as shown", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const example = readFileSync(join(root, 'examples', 'quickstart.mjs'), 'utf8');
  assert.ok(readme.includes(`\`\`\`js\n${example}\`\`\``), 'the README shows the file as it is');
  const r = spawnSync(process.execPath, [join(root, 'examples', 'quickstart.mjs')], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, GPUMEM_BACKEND: 'host' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^backend host, device 0: /m);
  assert.match(r.stdout, /^upload: staged, \d+\.\d GB\/s$/m);
  assert.match(r.stdout, /^after two steps: x\[0\] = 4 \(the batch wrote 1, scaled twice\), x\[4194303\] = 1212; host steps 2$/m);
  assert.match(r.stdout, /^pool: 1 cache hit\(s\), 1 miss\(es\)$/m);
});
