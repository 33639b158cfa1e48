/**
 * Files that are no trace are refused by what they are, with exit code 2 and nothing on stdout: a Triton server
 * trace and other JSON arrays, RAPIDS debug logs, archives and other compressions, Git LFS pointers, JSON objects
 * without trace events, nsys statistics; and the trace formats that look alike are told apart.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { ErrorCode, isGpuError } from '../errors.js';
import { runCli } from '../testing/harness.js';
import { detectTraceFormat } from './analyze.js';
import { openSqlite } from '../input/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-detect-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, content: string | Buffer): string => {
  const f = join(dir, name);
  writeFileSync(f, content);
  return f;
};

/** A tar archive of the files, in the ustar layout: a 512-byte header per file (name, octal size, magic), data padded to 512. */
function tar(files: Array<[string, string]>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, data] of files) {
    const h = Buffer.alloc(512);
    h.write(name, 0, 'utf8');
    h.write('0000644\0', 100);
    h.write(`${Buffer.byteLength(data).toString(8).padStart(11, '0')}\0`, 124);
    h.write('ustar\0', 257);
    h.write('00', 263);
    blocks.push(h, Buffer.from(data), Buffer.alloc((512 - (Buffer.byteLength(data) % 512)) % 512));
  }
  return Buffer.concat([...blocks, Buffer.alloc(1024)]);
}

const REFUSED: Array<[string, string | Buffer, RegExp]> = [
  [
    'triton.json',
    JSON.stringify([
      { id: 1, model_name: 'simple', model_version: -1 },
      { id: 1, timestamps: [{ name: 'HTTP_RECV_START', ns: 1 }] },
    ]),
    /a Triton Inference Server trace/,
  ],
  ['ir.json', JSON.stringify([{ op_name: 'aten::convolution_backward', replay_ir: {} }]), /a JSON array of objects with keys op_name, replay_ir/],
  ['empty.json', '[]', /an empty JSON array/],
  ['strings.json', '["a", "b"]', /a JSON array of strings/],
  ['rmm_log.txt', '[ 81234][10:20:30:123456][info  ] ----- RMM LOG BEGIN [PTDS DISABLED] -----\n', /an RMM debug log/],
  ['cudf.log', '[ 81234][10:20:30:123456][debug ] reading parquet\n', /a RAPIDS debug log/],
  [
    'traces.tar.gz',
    gzipSync(
      tar([
        ['rank0.pt.trace.json', '{"traceEvents":[]}'],
        ['rank1.pt.trace.json', '{"traceEvents":[]}'],
      ]),
    ),
    /a tar archive \(\.tar\.gz\) holding rank0\.pt\.trace\.json, rank1\.pt\.trace\.json/,
  ],
  ['traces.tar', tar([['a.json', '{}']]), /a tar archive holding a\.json/],
  [
    'traces.zip',
    Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(22), Buffer.from([10, 0, 0, 0]), Buffer.from('rank0.json')]),
    /a zip archive \(first entry rank0\.json\)/,
  ],
  ['trace.json.bz2', Buffer.concat([Buffer.from('BZh91AY&SY'), Buffer.alloc(40)]), /bzip2-compressed/],
  ['trace.json.zst', Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), Buffer.alloc(40)]), /zstd-compressed/],
  ['report1.sqlite', 'version https://git-lfs.github.com/spec/v1\noid sha256:a1c2\nsize 552960\n', /a Git LFS pointer to a file of 552960 bytes/],
  ['mi300.json', JSON.stringify({ name: 'MI300X', mem_bw_gbps: 5300 }), /a JSON object with keys name, mem_bw_gbps, not a trace/],
  ['stats.csv', '"Time (%)","Total Time (ns)","Num Calls","Avg (ns)","Name"\n50.0,100,1,100,"cudaMemcpy"\n', /an nsys stats report/],
  ['results.pftrace', Buffer.from([0x0a, 0x10, 0x01, 0x02]), /a Perfetto protobuf trace/],
  ['data_movement.csv', 'Index,KernelName,gpu-id,queue-id,FETCH_SIZE,WRITE_SIZE\n0,"k",8,0,8.875,604304.0\n', /a legacy rocprof \(v1\) counter table/],
];

test('files that are no trace are refused by what they are, exit 2, nothing on stdout', async () => {
  for (const [name, content, what] of REFUSED) {
    const f = file(name, content);
    assert.throws(
      () => detectTraceFormat(f),
      (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && what.test((e as Error).message),
      name,
    );
    const cli = await runCli(['analyze', f]);
    assert.equal(cli.code, 2, name);
    assert.equal(cli.out, '', `${name}: nothing on stdout`);
    assert.match(cli.err, what, name);
  }
});

test("legacy rocprof's results.db is told by its tables: only those tblextr.py creates", () => {
  const db = join(dir, 'results.db');
  const w = openSqlite(db, { write: true });
  w.exec('CREATE TABLE KERN ("Index" INTEGER, KernelName TEXT, BeginNs INTEGER, EndNs INTEGER)');
  w.close();
  assert.equal(detectTraceFormat(db), 'rocprof-db');
});

test('a top-level array of Chrome trace events is a trace; rocprof results.json is told from Kineto by its lanes', () => {
  assert.equal(detectTraceFormat(file('array.json', JSON.stringify([{ ph: 'X', cat: 'kernel', name: 'k', ts: 1, dur: 1 }]))), 'kineto');
  const lanes = '{ "traceEvents":[{}\n,{"args":{"name":"COPY"},"ph":"M","pid":1,"name":"process_name","sort_index":0}\n]}';
  assert.equal(detectTraceFormat(file('results.json', lanes)), 'rocprof-json');
  // a Kineto trace whose process is named COPY by the user is still Kineto: the label must be a rocprof metadata row
  const kineto = JSON.stringify({ traceEvents: [{ ph: 'M', name: 'process_name', pid: 1, args: { name: 'my COPY job' } }] });
  assert.equal(detectTraceFormat(file('kineto.json', kineto)), 'kineto');
});
