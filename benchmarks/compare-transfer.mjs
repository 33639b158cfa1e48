// The "Transfers as programs make them" table of docs/performance.md (benchmarks/compare.mjs calls it): many
// separate arrays, the first upload of a process, files, and the download against the best native staged shape;
// gpumem against the native program and PyTorch in the same rounds, with their bars.
export function programs(out, { nat, gpm, torch, bestNat, cell, median, disk }) {
  const g = (dirn, src, engine, extra = () => true) =>
    gpm((r) => r.test === 'transfer' && r.direction === dirn && r.srcKind === src && engine(r.engine) && extra(r));
  const many = (each) => (r) => Math.round(r.bytes / r.copies) === each;
  const rows = [];
  const add = (what, n, gv, t, bar) => rows.push({ what, n, gv, t, bar });
  const absolute = (gbps) => ({ kind: 'abs', gbps });
  // Lists of small arrays (rt.uploadMany, rt.downloadMany): at least 80% of the native one-ring program in the same
  // rounds. 4 MiB arrays: 35 GB/s. Separate rt.upload calls under Promise.all (a promise and a result each): 15 GB/s
  // at 64 KiB; at 16 KiB no bar.
  for (const [each, count, callsBar] of [
    [4 << 20, 256, absolute(35)],
    [64 << 10, 4096, absolute(15)],
    [16 << 10, 16384, undefined],
  ]) {
    const label = `${count} × ${each >= 1 << 20 ? `${each >> 20} MiB` : `${each >> 10} KiB`}`;
    const bar = each >= 1 << 20 ? absolute(35) : { kind: 'ratio', of: 0.8 };
    const natUp = nat((r) => r.row === `HtoD-many pageable staged-list ${each}`);
    if (each !== 16 << 10) {
      add(
        `${label}, awaited in turn (C: staged one by one, each waited for)`,
        nat((r) => r.row === `HtoD-many pageable staged-each ${each}`),
        g('HtoD-many', 'pageable', (e) => e === 'await-each', many(each)),
        torch(`torch HtoD-many .to(cuda) ${each}`),
      );
    }
    add(
      `${label}, Promise.all of rt.upload (C: one ring, no drain)`,
      natUp,
      g('HtoD-many', 'pageable', (e) => e === 'promise-all', many(each)),
      torch(`torch HtoD-many pin_memory()+to(non_blocking) ${each}`),
      callsBar,
    );
    add(
      `${label}, rt.uploadMany (C: one ring, no drain)`,
      natUp,
      g('HtoD-many', 'pageable', (e) => e === 'uploadMany', many(each)),
      [],
      bar,
    );
    add(
      `${label}, rt.uploadMany landing in reverse order (C: one ring, no drain)`,
      natUp,
      g('HtoD-many', 'pageable', (e) => e === 'uploadMany (reverse order)', many(each)),
      [],
      bar,
    );
    add(
      `${label}, rt.downloadMany (C: one ring, no drain, down)`,
      nat((r) => r.row === `DtoH-many pageable staged-list ${each}`),
      g('DtoH-many', 'device', (e) => e === 'downloadMany', many(each)),
      [],
      each >= 1 << 20 ? undefined : bar,
    );
  }
  add(
    'the first 1 GiB upload of a fresh process, the source ready before the runtime opens',
    nat((r) => r.row === 'HtoD-first pageable staged'),
    g('HtoD-first', 'pageable', (e) => e === 'gpumem-upload (first call)'),
    torch('torch HtoD-first pageable .to(cuda)'),
    absolute(30),
  );
  add(
    'the first 1 GiB upload of a fresh process, the runtime opened before the source is filled',
    [],
    g('HtoD-first', 'pageable', (e) => e === 'gpumem-upload (first call, runtime opened first)'),
    [],
    absolute(30),
  );
  // The same processes' second upload: the machine's steady rate at that moment, beside its first call.
  for (const [order, engine] of [
    ['the source ready first', 'gpumem-upload (first call), then the second call'],
    ['the runtime opened first', 'gpumem-upload (first call, runtime opened first), then the second call'],
  ]) {
    add(
      `the second 1 GiB upload in the same processes (${order})`,
      [],
      g('HtoD-first', 'pageable', (e) => e === engine),
      [],
      undefined,
    );
  }
  add(
    'file in the page cache to the device (C: pread on the threads into the ring)',
    nat((r) => r.row === 'FtoD file-cached pread-staged'),
    g('FtoD', 'file-cached', (e) => e.startsWith('uploadFile') && e !== 'uploadFile (cufile)'),
    torch('torch FtoD file-cached safetensors.load_file(cuda)'),
  );
  add(
    'file in the page cache: fs.readFileSync + rt.upload',
    [],
    g('FtoD', 'file-cached', (e) => e === 'readFileSync+upload'),
    torch('torch FtoD file-cached readinto(pinned)+to(cuda)'),
  );
  add(
    'cold file to the device, auto (C: O_DIRECT on the threads into the ring)',
    nat((r) => r.row === 'FtoD file-cold odirect-staged'),
    g('FtoD', 'file-cold', (e) => e.startsWith('uploadFile (') && !e.includes('forced') && e !== 'uploadFile (cufile)'),
    torch('torch FtoD file-cold safetensors.load_file(cuda)'),
  );
  add(
    'cold file to the device, buffered reads (C: pread through the cache)',
    nat((r) => r.row === 'FtoD file-cold pread-staged'),
    g('FtoD', 'file-cold', (e) => e.includes('forced')),
    torch('torch FtoD file-cold readinto(pinned)+to(cuda)'),
  );
  add(
    'file in the page cache, cuFile (compatibility mode where nvidia-fs is absent)',
    nat((r) => r.row === 'FtoD file-cached cufile'),
    g('FtoD', 'file-cached', (e) => e === 'uploadFile (cufile)'),
    [],
  );
  add(
    'cold file, cuFile',
    nat((r) => r.row === 'FtoD file-cold cufile'),
    g('FtoD', 'file-cold', (e) => e === 'uploadFile (cufile)'),
    [],
  );
  add(
    'device to a file (page cache): rt.downloadFile',
    [],
    g('DtoF', 'device', (e) => e.startsWith('downloadFile')),
    [],
  );
  add(
    'download: best native staged shape / rt.download',
    bestNat('DtoH pageable staged'),
    g('DtoH', 'device', (e) => e.startsWith('gpumem-download')),
    torch('torch DtoH pageable copy_'),
    { kind: 'ratio', of: 0.9 },
  );
  const shown = rows.filter((r) => r.n.length || r.gv.length);
  if (!shown.length) return;
  out.push('### Transfers as programs make them', '');
  out.push('| transfer | native C (GB/s) | gpumem (GB/s) | PyTorch (GB/s) | gpumem / native | bar |', '|---|---:|---:|---:|---:|---|');
  for (const r of shown) {
    const ratio = r.n.length && r.gv.length ? median(r.gv) / median(r.n) : NaN;
    let verdict = '';
    if (r.bar?.kind === 'abs' && r.gv.length) verdict = median(r.gv) >= r.bar.gbps ? `met (≥ ${r.bar.gbps} GB/s)` : `**not met** (< ${r.bar.gbps} GB/s)`;
    if (r.bar?.kind === 'ratio' && !Number.isNaN(ratio))
      verdict = ratio >= r.bar.of ? `met (≥ ${r.bar.of * 100}% of native)` : `**not met** (< ${r.bar.of * 100}% of native)`;
    out.push(`| ${r.what} | ${cell(r.n)} | ${cell(r.gv)} | ${cell(r.t)} | ${Number.isNaN(ratio) ? '–' : `${(100 * ratio).toFixed(0)}%`} | ${verdict} |`);
  }
  const ddRates = disk
    .map((l) => /([\d.]+) ([GM])B\/s/.exec(l))
    .filter(Boolean)
    .map((m) => Number(m[1]) / (m[2] === 'M' ? 1000 : 1));
  out.push(
    '',
    `Rows of many arrays count every array's bytes once; the file rows the file's bytes. The disk itself (dd iflag=direct, bs=4M): ${ddRates.length ? `${cell(ddRates)} GB/s` : 'not measured'}.`,
    '',
  );
}
