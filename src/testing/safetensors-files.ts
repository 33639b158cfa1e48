/**
 * What the safetensors tests share: a temporary folder removed after the tests, files written byte by byte as the
 * format's README describes them, device bytes read back, and the check that a refused load left nothing behind.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { openFds } from './harness.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { ErrorCode } from '../errors.js';
import { SafetensorsError, serializeSafetensors, type SafetensorsHostTensor, type SafetensorsProblem } from '../formats/safetensors.js';
import type { Allocation } from '../memory/allocation.js';
import { openRuntime, type Runtime } from '../runtime/runtime.js';

/** A folder of the test file's own, removed when its tests end; `fresh()` answers a new path in a new sub-folder. */
export function scratchFolder(): { dir: string; fresh: (name?: string) => string; folder: () => string } {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-safetensors-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  let seq = 0;
  const folder = (): string => {
    const d = join(dir, `t${seq++}`);
    mkdirSync(d, { recursive: true });
    return d;
  };
  return { dir, folder, fresh: (name = 'model.safetensors') => join(folder(), name) };
}

/** A host runtime with two devices. */
export const hostRuntime = (): Runtime => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 28 } });

/** `bytes` of `a` from `offset`, read back from the device. */
export async function deviceBytes(rt: Runtime, a: Allocation, offset: number, bytes: number): Promise<Buffer> {
  if (bytes === 0) return Buffer.alloc(0);
  const out = new Uint8Array(bytes);
  await rt.download(out, a, { srcOffset: offset, bytes });
  return Buffer.from(out);
}

/** A file as the format's README describes it, written byte by byte: u64 LE header length, the header, the data. */
export function specFile(path: string, header: string, data: number[] | Uint8Array): Buffer {
  const h = Buffer.from(header, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(h.byteLength));
  const bytes = Buffer.concat([prefix, h, Buffer.from(data)]);
  writeFileSync(path, bytes);
  return bytes;
}

/**
 * Asserts that `p` rejects with a SafetensorsError of `problem` and leaves no device memory, no pinned memory (but
 * `pinned` allocations of a mover the test holds) and no file descriptor behind.
 */
export async function refused(rt: Runtime, p: () => Promise<unknown>, problem: SafetensorsProblem, pinned = 0): Promise<SafetensorsError> {
  const fds = openFds();
  let caught: unknown;
  await p().catch((e: unknown) => (caught = e));
  assert.ok(caught instanceof SafetensorsError, `expected a SafetensorsError, got ${String(caught)}`);
  assert.equal(caught.problem, problem, caught.message);
  assert.equal(caught.code, ErrorCode.BAD_INPUT);
  assert.equal(rt.liveMemory().device.count, 0, 'no device memory left allocated');
  assert.equal(rt.liveMemory().pinned.count, pinned, 'no pinned slot left allocated but those of a mover given');
  assert.equal(openFds(), fds, 'no file descriptor left open');
  return caught;
}

/** A sharded checkpoint: two shards and their index, in a folder of its own. */
export function sharded(folder: string): { folder: string; tensors: Map<string, Uint8Array> } {
  const tensors = new Map<string, Uint8Array>();
  const shard = (names: string[], n: number): SafetensorsHostTensor[] =>
    names.map((name, i) => {
      const data = Uint8Array.from({ length: 64 * (i + 1) }, (_, k) => (k + n * 13 + i) & 0xff);
      tensors.set(name, data);
      return { name, dtype: 'F32', shape: [16 * (i + 1)], data };
    });
  writeFileSync(join(folder, 'model-00001-of-00002.safetensors'), serializeSafetensors(shard(['a.weight', 'a.bias'], 1), { format: 'pt' }));
  writeFileSync(join(folder, 'model-00002-of-00002.safetensors'), serializeSafetensors(shard(['b.weight', 'b.bias', 'extra'], 2), { format: 'pt' }));
  const weightMap = {
    'a.weight': 'model-00001-of-00002.safetensors',
    'a.bias': 'model-00001-of-00002.safetensors',
    'b.weight': 'model-00002-of-00002.safetensors',
    'b.bias': 'model-00002-of-00002.safetensors',
  };
  writeFileSync(join(folder, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 448 }, weight_map: weightMap }));
  return { folder, tensors };
}
