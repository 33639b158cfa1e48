/**
 * `gpumem analyze DIR` over a folder laid with traps: a link to the folder itself, links out of it (to /usr and
 * /proc), a dangling link, a link loop, a pipe, an unreadable file and folder. Every trace is read once, nothing
 * outside the folder is read, and what was skipped is noted, not fatal.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { RanksResult } from '../analyze/ranks.js';
import { filesInFolder } from '../input/folder.js';
import { runCli } from '../testing/harness.js';
import { writeRankTraces } from '../testing/rank-traces.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-folder-'));
after(() => {
  for (const p of [join(dir, 'run', 'locked'), join(dir, 'run', 'secret.json')]) {
    try {
      chmodSync(p, 0o755);
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
});
const ROOT = process.getuid?.() === 0;

function trappedFolder(): string {
  const run = join(dir, 'run');
  mkdirSync(run);
  writeRankTraces(run, 2);
  symlinkSync('.', join(run, 'self'));
  symlinkSync('..', join(run, 'parent'));
  symlinkSync('/usr', join(run, 'usr'));
  symlinkSync('/proc/self/environ', join(run, 'environ.json'));
  symlinkSync(join(run, 'rank-0.pt.trace.json'), join(run, 'again.pt.trace.json'));
  symlinkSync(join(run, 'gone.json'), join(run, 'dangling.json'));
  symlinkSync('loop-b', join(run, 'loop-a'));
  symlinkSync('loop-a', join(run, 'loop-b'));
  execFileSync('mkfifo', [join(run, 'pipe.json')]);
  mkdirSync(join(run, 'locked'));
  writeFileSync(join(run, 'locked', 'x.json'), '{}');
  writeFileSync(join(run, 'secret.json'), '{"traceEvents": []}');
  chmodSync(join(run, 'locked'), 0);
  chmodSync(join(run, 'secret.json'), 0);
  return run;
}

test('a folder with links to itself and out of it, dangling links, a pipe and unreadable entries: each trace once, the rest noted', async () => {
  const run = trappedFolder();
  const walked = filesInFolder(run);
  const expected = [join(run, 'rank-0.pt.trace.json'), join(run, 'rank-1.pt.trace.json')];
  if (ROOT) expected.push(join(run, 'secret.json'), join(run, 'locked', 'x.json')); // root reads what mode 000 locks
  assert.deepEqual(walked.files.sort(), expected.sort(), 'each trace once; nothing through a link out of the folder');
  const notes = walked.notes.join('\n');
  for (const what of [/skipped 3 link\(s\) to folders \(not followed\): .*self/, /outside the folder/, /dangling link/, /cannot be followed/, /special file/])
    assert.match(notes, what);
  if (!ROOT) assert.match(notes, /cannot be read \(permission denied\)/);

  const r = await runCli(['analyze', run, '--json']);
  assert.equal(r.code, 0, r.err);
  const result = JSON.parse(r.out) as RanksResult;
  assert.equal(result.ranks.length, 2, 'two ranks, not five');
  assert.match(r.err, /note: .*link\(s\) to folders \(not followed\)/);
  assert.match(r.err, /dangling link/);
});

test('a folder that is only traps: refused as holding no trace, with exit 2, not a crash', async () => {
  const only = join(dir, 'only-links');
  mkdirSync(only);
  symlinkSync('/usr', join(only, 'usr'));
  symlinkSync(join(only, 'none'), join(only, 'dangling'));
  const r = await runCli(['analyze', only]);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /holds no trace/);
});
