/**
 * Names read from files reach the terminal inert: a tensor named with escape sequences, a Kineto device name that
 * forges a line, a file name with a bell, printed by the real CLI in a child process, come out as visible \u escapes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { serializeSafetensors } from '../formats/safetensors.js';
import { terminalText } from '../render/terminal-text.js';

const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../../fixtures/traces/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-terminal-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Sets the window title, rings, clears the screen, and (through a carriage return and a C1 CSI) rewrites the line. */
const HOSTILE = 'w\x1b]0;pwned\x07\x1b[2J\r\x9b2Kno problems found\u202e';
// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the test
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

function cli(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, GPUMEM_BACKEND: 'host' }, timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('terminalText escapes C0 (but newline and tab), DEL, C1 and bidi overrides, and leaves the rest alone', () => {
  assert.equal(terminalText('plain\ttext\nwith µ and 日本'), 'plain\ttext\nwith µ and 日本');
  assert.equal(terminalText('a\x1b[2Jb\x07\r\x7f\x9b\u202e'), 'a\\u001b[2Jb\\u0007\\u000d\\u007f\\u009b\\u202e');
  assert.equal(JSON.parse(`"${terminalText('\x9b\u202e')}"`), '\x9b\u202e', 'the escape is a JSON escape: JSON output keeps its meaning');
});

test('load-weights prints a hostile tensor name, in its table and its errors, as visible escapes', () => {
  const file = join(dir, `model\x07.safetensors`);
  writeFileSync(file, serializeSafetensors([{ name: HOSTILE, dtype: 'F32', shape: [2], data: new Uint8Array(8) }]));
  const ok = cli(['load-weights', file, '--verify']);
  assert.equal(ok.code, 0, ok.err);
  assert.doesNotMatch(ok.out + ok.err, CONTROL);
  assert.ok(ok.out.includes('w\\u001b]0;pwned\\u0007'), ok.out);
  const missing = cli(['load-weights', join(dir, 'no\x1b[2Jsuch.safetensors')]);
  assert.equal(missing.code, 2);
  assert.doesNotMatch(missing.out + missing.err, CONTROL);
  assert.match(missing.err, /no\\u001b\[2Jsuch/);
});

test('analyze prints a hostile Kineto device name and kernel name, and the file name, as visible escapes', () => {
  const trace = JSON.parse(gunzipSync(readFileSync(join(FIXTURES, 'pytorch-cuda-naive.pt.trace.json.gz'))).toString('utf8')) as {
    deviceProperties: Array<{ name: string }>;
    traceEvents: Array<{ cat?: string; name?: string }>;
  };
  trace.deviceProperties[0]!.name = `NVIDIA H200${HOSTILE}`;
  for (const e of trace.traceEvents) if (e.cat === 'kernel') e.name = `${e.name}${HOSTILE}`;
  const file = join(dir, `trace\x1b]0;t\x07.pt.trace.json`);
  writeFileSync(file, JSON.stringify(trace));
  for (const args of [[file], [file, '--progress']]) {
    const r = cli(['analyze', ...args]);
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(r.out + r.err, CONTROL, args.join(' '));
    assert.ok(r.out.includes('NVIDIA H200w\\u001b]0;pwned'), r.out.slice(0, 400));
    assert.ok(r.out.includes('trace\\u001b]0;t\\u0007'), 'the file name too');
  }
});
