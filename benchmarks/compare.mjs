// The tables of docs/performance.md, from one evidence folder written by benchmarks/gpu-verify.sh: gpumem against the
// native CUDA C programs of benchmarks/native/ (and PyTorch where it ran), round by round.
//   node benchmarks/compare.mjs DIR                          prints the tables (markdown)
//   node benchmarks/compare.mjs DIR --update docs/performance.md   also writes them between the gpu-verify markers
// A cell is the median over rounds, with the range in brackets; "spread" is the native program's own run-to-run
// spread ((max - min) / median over rounds): a difference inside it cannot be told from noise.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { programs } from './compare-transfer.mjs';

const [dir, flag, target] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node benchmarks/compare.mjs EVIDENCE_DIR [--update docs/performance.md]');
  process.exit(2);
}

const files = readdirSync(dir).sort();
const rounds = (prefix, ext) => files.filter((f) => f.startsWith(prefix) && f.endsWith(ext)).map((f) => join(dir, f));
const jsonl = (f) =>
  readFileSync(f, 'utf8')
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) => JSON.parse(l));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x) => (x === undefined || Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const cell = (xs) => (xs.length === 0 ? '–' : xs.length === 1 ? fmt(xs[0]) : `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`);
const pct = (x) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}%`;
const spread = (xs) => (xs.length > 1 ? (Math.max(...xs) - Math.min(...xs)) / median(xs) : NaN);
const size = (n) => (n >= 2 ** 30 ? `${n / 2 ** 30} GiB` : n >= 2 ** 20 ? `${n / 2 ** 20} MiB` : `${n / 2 ** 10} KiB`);

const machine = existsSync(join(dir, 'machine.txt')) ? readFileSync(join(dir, 'machine.txt'), 'utf8') : '';
const out = [];
const nRounds = Math.max(
  ...['native-bandwidth-', 'native-transfer-', 'native-memory-'].map((p) => rounds(p, '.jsonl').length),
  rounds('native-collectives-', '.txt').length,
);
const calls = machine.split('\n').filter((l) => l.startsWith('date: ')).length;
const when = /date: (\S+)/.exec(machine)?.[1]?.slice(0, 10) ?? basename(dir).slice(0, 10);
const gpuLine = machine.split('\n').find((l) => /NVIDIA|AMD/.test(l) && l.includes(',')) ?? '';
out.push(
  `Measured ${when} on ${gpuLine.split(',')[0] || 'the GPU machine'} (${
    machine
      .split('\n')
      .find((l) => l.startsWith('host:'))
      ?.slice(6) ?? ''
  }; driver ${gpuLine.split(',')[1]?.trim() ?? '?'}; PCIe gen ${gpuLine.split(',')[2]?.trim() ?? '?'} x${gpuLine.split(',')[3]?.trim() ?? '?'}). ` +
    `${nRounds} interleaved round(s) of the native programs and gpumem${calls > 1 ? `, in ${calls} calls that may have landed on different machines of the same kind (machine.txt lists each call's groups; a native program and its gpumem rows always ran in the same call)` : ''}; a cell is the median over rounds (range). GB = 1e9 bytes. ` +
    `Evidence: \`${relative(process.cwd(), dir)}/\`; reproduce with \`npm run gpu:verify\`.`,
  '',
);

// Per row of the copy and kernel tables: both figures and whether they agree within the native spread. Written to
// agreement.json; with --update also to src/report/native-agreement.ts, which `gpumem report` reads to quote only
// the kinds of row that agreed.
const agreement = [];
/** True when the two sets of per-round figures overlap: the rounds cannot tell them apart. */
const overlap = (a, b) => Math.min(...a) <= Math.max(...b) && Math.min(...b) <= Math.max(...a);
const keyOf = (r) => [r.test, r.direction, r.srcKind, r.dstKind, r.engine, r.bytes].join('|');

// ---- copies -------------------------------------------------------------------------------------------------
const nb = rounds('native-bandwidth-', '.jsonl').map(jsonl);
const gc = rounds('gpumem-copy-', '.json').map((f) => JSON.parse(readFileSync(f, 'utf8')));
if (nb.length && gc.length) {
  const kinds = [
    ['HtoD', 'pinned', 'pinned', 'device'],
    ['DtoH', 'pinned', 'device', 'pinned'],
    ['HtoD', 'pageable', 'pageable', 'device'],
    ['DtoH', 'pageable', 'device', 'pageable'],
    ['DtoD', 'device', 'device', 'device'],
  ];
  const sizes = [...new Set(nb[0].map((r) => r.bytes))].sort((a, b) => a - b);
  out.push('### Copies: gpumem bench against native CUDA C', '');
  out.push('| size | copy | native (GB/s) | gpumem (GB/s) | difference | native spread | within spread |', '|---:|---|---:|---:|---:|---:|---|');
  let within = 0;
  let total = 0;
  for (const n of sizes) {
    for (const [dirn, kind, src, dst] of kinds) {
      const nat = nb
        .map((run) => run.find((r) => r.bytes === n && r.direction === dirn && r.kind === kind))
        .filter(Boolean)
        .map((r) => median(r.gbps));
      const gm = gc
        .map((b) =>
          b.results.find(
            (r) => r.test === 'copy' && r.engine === 'copy-engine' && r.bytes === n && r.direction === dirn && r.srcKind === src && r.dstKind === dst,
          ),
        )
        .filter(Boolean)
        .map((r) => r.medianGBps);
      if (!nat.length || !gm.length) continue;
      const d = median(gm) / median(nat) - 1;
      const sp = spread(nat);
      const ok = Number.isNaN(sp) ? undefined : Math.abs(d) <= Math.max(sp, 0.01);
      total++;
      if (ok) within++;
      const k = keyOf({ test: 'copy', direction: dirn, srcKind: src, dstKind: dst, engine: 'copy-engine', bytes: n });
      agreement.push({
        key: k,
        unit: 'GB/s',
        native: median(nat),
        gpumem: median(gm),
        difference: d,
        nativeSpread: sp,
        agrees: ok ?? null,
        rangesOverlap: overlap(nat, gm),
        nativeVerified: true,
      });
      out.push(
        `| ${size(n)} | ${dirn} ${kind} | ${cell(nat)} | ${cell(gm)} | ${pct(d)} | ${Number.isNaN(sp) ? '–' : `${(100 * sp).toFixed(1)}%`} | ${ok === undefined ? '–' : ok ? 'yes' : '**no**'} |`,
      );
    }
  }
  out.push('', `${within} of ${total} cells within the native program's own run-to-run spread (or 1%).`, '');
}

// ---- transfers ----------------------------------------------------------------------------------------------
const nt = rounds('native-transfer-', '.jsonl').map(jsonl);
const gt = rounds('gpumem-transfer-', '.json').map((f) => JSON.parse(readFileSync(f, 'utf8')));
const tt = rounds('torch-transfer-', '.jsonl').map(jsonl);
if (nt.length && gt.length) {
  /** Per round, the median of a native row's repeats (filtered by `pick`). */
  const nat = (pick) =>
    nt
      .map((run) => run.filter(pick))
      .filter((rs) => rs.length)
      .map((rs) => median(rs.map((r) => r.gbps ?? r.us)));
  /** Per round, gpumem's median of the row `pick` selects. */
  const gpm = (pick, field = 'medianGBps') =>
    gt
      .map((b) => b.results.find(pick))
      .filter(Boolean)
      .map((r) => r[field]);
  /** Per round, the best of several native shapes (the median of each shape's repeats, then the maximum). */
  const bestNat = (row) =>
    nt
      .map((run) => {
        const shapes = new Map();
        for (const r of run.filter((x) => x.row === row)) {
          const k = `${r.threads}/${r.chunkBytes}`;
          shapes.set(k, [...(shapes.get(k) ?? []), r.gbps]);
        }
        return Math.max(...[...shapes.values()].map(median));
      })
      // a run that did not measure the row (a --parts selection) has no best shape
      .filter(Number.isFinite);
  const bytes = gt[0].results.find((r) => r.test === 'transfer' && r.engine === 'runtime-direct')?.bytes ?? 0;
  const torch = (row) =>
    tt
      .map((run) => run.filter((r) => r.row === row))
      .filter((rs) => rs.length)
      .map((rs) => median(rs.map((r) => r.gbps)));
  const t = (e, dirn, src, dst) => (r) =>
    r.test === 'transfer' && r.direction === dirn && r.srcKind === src && r.dstKind === dst && (typeof e === 'function' ? e(r) : r.engine === e);
  out.push(`### Transfers of ${size(bytes)} between pageable memory and the device`, '');
  out.push('| transfer | native C (GB/s) | gpumem (GB/s) | gpumem / native | bar |', '|---|---:|---:|---:|---|');
  const line = (name, n, g, bar) => {
    const ratio = n.length && g.length ? median(g) / median(n) : NaN;
    const verdict =
      bar === undefined || Number.isNaN(ratio) ? '' : ratio >= bar ? `met (≥ ${Math.round(bar * 100)}%)` : `**not met** (< ${Math.round(bar * 100)}%)`;
    out.push(`| ${name} | ${cell(n)} | ${cell(g)} | ${Number.isNaN(ratio) ? '–' : `${(100 * ratio).toFixed(0)}%`} | ${verdict} |`);
  };
  const upStaged = gpm(t((r) => r.engine.startsWith('gpumem-upload'), 'HtoD', 'pageable', 'device'));
  const downStaged = gpm(t((r) => r.engine.startsWith('gpumem-download'), 'DtoH', 'device', 'pageable'));
  const upDirect = gpm(t('runtime-direct', 'HtoD', 'pageable', 'device'));
  line(
    'upload, direct (runtime pageable copy)',
    nat((r) => r.row === 'HtoD pageable runtime-direct'),
    upDirect,
  );
  line(
    'upload, register + copy + unregister',
    nat((r) => r.row === 'HtoD pageable register+copy+unregister'),
    gpm(t('register+copy+unregister', 'HtoD', 'pageable', 'device')),
  );
  line('upload, staged: native best shape / rt.upload (defaults)', bestNat('HtoD pageable staged'), upStaged, 0.9);
  line(
    'download, direct (runtime pageable copy)',
    nat((r) => r.row === 'DtoH pageable runtime-direct'),
    gpm(t('runtime-direct', 'DtoH', 'device', 'pageable')),
  );
  line('download, staged: native best shape / rt.download (defaults)', bestNat('DtoH pageable staged'), downStaged, 0.9);
  const gshape = gt[0].results.find(t((r) => r.engine.startsWith('gpumem-upload'), 'HtoD', 'pageable', 'device'));
  out.push(
    '',
    `rt.upload and rt.download ran with their defaults on this machine: ${gshape?.threads ?? '?'} threads, ${size(gshape?.chunkBytes ?? 0)} chunks, 8 deep.`,
    '',
  );
  if (tt.length) {
    out.push(
      'PyTorch on the same machine, same rounds:',
      '',
      '| transfer | PyTorch (GB/s) | rt.upload / rt.download (GB/s) | gpumem / PyTorch |',
      '|---|---:|---:|---:|',
    );
    for (const [row, g] of [
      ['torch HtoD pageable .to(cuda)', upStaged],
      ['torch HtoD pin_memory()+copy', upStaged],
      ['torch DtoH pageable .to(cpu)', downStaged],
      ['torch DtoH pageable copy_', downStaged],
    ]) {
      const p = torch(row);
      out.push(`| ${row.replace('torch ', '')} | ${cell(p)} | ${cell(g)} | ${p.length && g.length ? `${(median(g) / median(p)).toFixed(1)}x` : '–'} |`);
    }
    out.push('');
  }
  out.push(
    'Staged, by shape (threads / chunk, ring of 8):',
    '',
    '| direction | threads | chunk | native C (GB/s) | gpumem (GB/s) | gpumem / native |',
    '|---|---:|---:|---:|---:|---:|',
  );
  const shapes = [
    ...new Map(
      nt[0].filter((r) => r.row === 'HtoD pageable staged' || r.row === 'DtoH pageable staged').map((r) => [`${r.row}|${r.threads}|${r.chunkBytes}`, r]),
    ).values(),
  ];
  for (const s of shapes) {
    const dirn = s.row.startsWith('HtoD') ? 'HtoD' : 'DtoH';
    const n = nat((r) => r.row === s.row && r.threads === s.threads && r.chunkBytes === s.chunkBytes);
    const g = gpm((r) => r.test === 'transfer' && r.engine === 'staged' && r.direction === dirn && r.threads === s.threads && r.chunkBytes === s.chunkBytes);
    out.push(
      `| ${dirn} | ${s.threads} | ${size(s.chunkBytes)} | ${cell(n)} | ${cell(g)} | ${n.length && g.length ? `${((100 * median(g)) / median(n)).toFixed(0)}%` : '–'} |`,
    );
  }
  out.push(
    '',
    'Host copies alone, pageable into pinned memory (the ceiling of a staged upload):',
    '',
    '| threads | native C (GB/s) | gpumem host copier (GB/s) |',
    '|---:|---:|---:|',
  );
  for (const th of [1, 2, 4, 8, 12, 16]) {
    const n = nat((r) => r.row === 'HtoH pageable->pinned host-threads' && r.threads === th);
    const g = gpm((r) => r.test === 'transfer' && r.engine === 'host-threads' && r.threads === th);
    if (n.length || g.length) out.push(`| ${th} | ${cell(n)} | ${cell(g)} |`);
  }
  out.push(
    '',
    '### 1000 copies of 64 KiB from pinned memory',
    '',
    '| how | native C (GB/s) | gpumem (GB/s) | gpumem / native | bar |',
    '|---|---:|---:|---:|---|',
  );
  const small = (e) => gpm((r) => r.test === 'transfer' && r.direction === 'HtoD-small' && r.engine === e);
  const nsmall = (row) => nat((r) => r.row === `HtoD-small pinned ${row}`);
  line('one by one', nsmall('one-by-one'), small('one-by-one'));
  line('one batch call: cudaMemcpyBatchAsync / rt.copyBatch, the same array each call', nsmall('batch'), small('copyBatch'), 0.9);
  line('one batch call: cudaMemcpyBatchAsync / rt.copyBatch, a new array each call (all checks)', nsmall('batch'), small('copyBatch-new-array'));
  line('one batch call: cudaMemcpyBatchAsync / rt.prepareBatch, run', nsmall('batch'), small('prepared-batch'), 0.9);
  line('one graph of the 1000 copies', nsmall('graph'), small('graph'));
  line('one copy of the same 64000 KiB', nsmall('single-copy'), small('single-copy'));
  out.push(
    '',
    '### A chain of 100 small operations (4 KiB fills and copies), µs per operation',
    '',
    '| how | native C (µs) | gpumem (µs) |',
    '|---|---:|---:|',
  );
  for (const e of ['one-by-one', 'graph']) {
    out.push(
      `| ${e === 'graph' ? 'captured once, launched as one graph' : 'enqueued one by one'} | ${cell(nat((r) => r.row === `chain-100 ${e}`))} | ${cell(gpm((r) => r.test === 'transfer' && r.direction === 'chain-100' && r.engine === e, 'medianUs'))} |`,
    );
  }
  out.push('');
  programs(out, {
    nat,
    gpm,
    torch,
    bestNat,
    cell,
    median,
    disk: files.filter((f) => /^disk-\d+\.txt$/.test(f)).map((f) => readFileSync(join(dir, f), 'utf8').trim()),
  });
}

// ---- collectives: NCCL from C (the shared yardstick, its text output) against gpumem bench --only collectives ----
const nc = rounds('native-collectives-', '.txt').map((f) => {
  const rows = [];
  let buffers;
  for (const line of readFileSync(f, 'utf8').split('\n')) {
    if (/^cudaMalloc buffers/.test(line)) buffers = 'device';
    else if (/^ncclMemAlloc \+ ncclCommRegister buffers/.test(line)) buffers = 'nccl-registered';
    const m = /^(all-reduce|all-gather|reduce-scatter)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$/.exec(line);
    if (m && buffers) rows.push({ op: m[1], bytes: Number(m[2]), busGBps: Number(m[5]), buffers });
  }
  return rows;
});
const gcoll = rounds('gpumem-collectives-', '.json').map((f) => JSON.parse(readFileSync(f, 'utf8')));
if (nc.length && gcoll.length) {
  const ranks = gcoll[0].results.find((r) => r.test === 'collective')?.ranks ?? '?';
  out.push(`### Collectives over ${ranks} GPUs: gpumem bench against NCCL from C, bus bandwidth (GB/s)`, '');
  out.push('| collective | buffers | size | native C | gpumem | gpumem / native | native spread | bar |', '|---|---|---:|---:|---:|---:|---:|---|');
  const keys = [...new Map(nc[0].map((r) => [`${r.buffers}|${r.op}|${r.bytes}`, r])).values()];
  for (const k of keys) {
    const nat = nc
      .map((run) => run.find((r) => r.buffers === k.buffers && r.op === k.op && r.bytes === k.bytes))
      .filter(Boolean)
      .map((r) => r.busGBps);
    const gv = gcoll
      .map((b) => b.results.find((r) => r.test === 'collective' && r.direction === k.op && r.srcKind === k.buffers && r.bytes === k.bytes))
      .filter(Boolean)
      .map((r) => r.medianBusGBps);
    if (!nat.length || !gv.length) continue;
    const ratio = median(gv) / median(nat);
    const sp = spread(nat);
    const barred = k.op === 'all-reduce' && k.bytes >= 64 * 2 ** 20;
    const verdict = barred ? (ratio >= 0.95 ? 'met (≥ 95%)' : '**not met** (< 95%)') : '';
    out.push(
      `| ${k.op} | ${k.buffers} | ${size(k.bytes)} | ${cell(nat)} | ${cell(gv)} | ${(100 * ratio).toFixed(0)}% | ${Number.isNaN(sp) ? '–' : `${(100 * sp).toFixed(1)}%`} | ${verdict} |`,
    );
  }
  out.push('', 'The bar: all-reduce bus bandwidth from 64 MiB within 5% of NCCL from C.', '');
}

// ---- every row with a kernel or an allocation: native memory.cu against gpumem, row by row ---------------------
const nm = rounds('native-memory-', '.jsonl').map(jsonl);
const gm = [...rounds('gpumem-memory-', '.json'), ...rounds('gpumem-copy-', '.json')].map((f) => JSON.parse(readFileSync(f, 'utf8')));
if (nm.length && gm.length) {
  const key = keyOf;
  const latency = (r) => r.counted === 'latency';
  const nativeRows = new Map();
  for (const run of nm) for (const r of run) nativeRows.set(key(r), [...(nativeRows.get(key(r)) ?? []), r]);
  const gpumemRows = new Map();
  for (const b of gm) for (const r of b.results) gpumemRows.set(key(r), [...(gpumemRows.get(key(r)) ?? []), r]);
  out.push('### Kernels, managed and zero-copy memory, SM copies, allocation: gpumem bench against native CUDA C', '');
  out.push(
    "The native program (benchmarks/native/memory.cu) runs the kernels gpumem compiles, with the same grids, sizes, repeats and timing; a difference is the cost of gpumem's path.",
    '',
  );
  out.push('| test | row | size | native | gpumem | difference | native spread | within spread |', '|---|---|---:|---:|---:|---:|---:|---|');
  let within = 0;
  let rowsCompared = 0;
  for (const [k, rs] of nativeRows) {
    const g = gpumemRows.get(k);
    if (!g) continue;
    const r0 = rs[0];
    const unit = latency(r0) ? 'µs' : 'GB/s';
    const nat = rs.map((r) => median(latency(r) ? r.us : r.gbps));
    const gv = g.map((r) => (latency(r) ? r.medianUs : r.medianGBps));
    const d = median(gv) / median(nat) - 1;
    const sp = spread(nat);
    const ok = Number.isNaN(sp) ? undefined : Math.abs(d) <= Math.max(sp, 0.01);
    if (ok) within++;
    const verified = rs.every((r) => r.verified !== false);
    rowsCompared++;
    agreement.push({
      key: k,
      unit,
      native: median(nat),
      gpumem: median(gv),
      difference: d,
      nativeSpread: sp,
      agrees: ok ?? null,
      rangesOverlap: overlap(nat, gv),
      nativeVerified: verified,
    });
    out.push(
      `| ${r0.test} | ${r0.direction} ${r0.srcKind}→${r0.dstKind} (${r0.engine}) | ${size(r0.bytes)} | ${cell(nat)} ${unit} | ${cell(gv)} ${unit} | ${pct(d)} | ${Number.isNaN(sp) ? '–' : `${(100 * sp).toFixed(1)}%`} | ${ok === undefined ? '–' : ok ? 'yes' : '**no**'}${verified ? '' : ' (native row failed its check)'} |`,
    );
  }
  const own = [...gpumemRows.values()].map((x) => x[0]).filter((r) => r.engine === 'gpumem-pool');
  out.push(
    '',
    `${within} of ${rowsCompared} rows within the native program's own run-to-run spread (or 1%). A row outside it is a bug until docs/performance.md explains it.`,
    ...(own.length ? ['', `No native counterpart: ${own.length} rows of gpumem's own caching pool (the thing measured exists only in gpumem).`] : []),
    '',
  );
}
const agreementDoc = { measured: when, machine: gpuLine.split(',')[0] || undefined, evidence: relative(process.cwd(), dir), rows: agreement };
if (agreement.length) writeFileSync(join(dir, 'agreement.json'), `${JSON.stringify(agreementDoc, null, 2)}\n`);

const text = out.join('\n');
if (flag === '--update') {
  const doc = readFileSync(target, 'utf8');
  const begin = '<!-- gpu-verify:begin -->';
  const end = '<!-- gpu-verify:end -->';
  const i = doc.indexOf(begin);
  const j = doc.indexOf(end);
  if (i < 0 || j < i) {
    console.error(`${target}: no ${begin} ... ${end} markers`);
    process.exit(2);
  }
  writeFileSync(target, `${doc.slice(0, i + begin.length)}\n${text}\n${doc.slice(j)}`);
  if (agreement.length) {
    // The kinds of row `gpumem report` may quote: generated from the published evidence, never edited by hand.
    // agrees: within the native spread; indistinct: outside it, but the rounds of the two overlap; differs: apart.
    const rows = agreement.map((r) => [r.key, r.agrees === true ? 'agrees' : r.agrees === null ? 'unjudged' : r.rangesOverlap ? 'indistinct' : 'differs']);
    const ts = [
      '// Generated by benchmarks/compare.mjs --update from the evidence of docs/performance.md: do not edit.',
      "import type { NativeAgreement } from './fidelity.js';",
      '',
      `export const NATIVE_AGREEMENT: NativeAgreement = ${JSON.stringify({ measured: when, machine: agreementDoc.machine ?? 'unknown', evidence: agreementDoc.evidence, rows: Object.fromEntries(rows) }, null, 2)};`,
      '',
    ].join('\n');
    writeFileSync(new URL('../src/report/native-agreement.ts', import.meta.url), ts);
  }
}
process.stdout.write(`${text}\n`);
