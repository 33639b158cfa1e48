/** `gpumem analyze FILE...`: findings from profiler and allocator traces. Loads no GPU library. */
import { statSync, writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { TRACE_FORMATS, type TraceFormat } from '../analyze/trace-formats.js';
import { checkWritable, progressText, type Io } from './context.js';
import { UsageError } from './errors.js';
import { parsePositive } from './options.js';
import { outputWidth } from '../render/width.js';
import type { PytorchSnapshot } from '../formats/pytorch-snapshot.js';
import type { ReplayReport } from '../replay/replay.js';

export interface AnalyzeCliOptions {
  json?: boolean;
  html?: string;
  fromBench?: string;
  format?: TraceFormat | 'auto';
  progress?: boolean;
  workers?: number;
}

/** Files this big (bytes) get progress lines on stderr even when stderr is not a terminal. */
const PROGRESS_FROM = 32 * 2 ** 20;

export function defineAnalyze(program: Command, io: Io): void {
  program
    .command('analyze')
    .description('find memory problems in profiler and allocator traces: what to change and the time it saves (no GPU needed)')
    .argument(
      '<files...>',
      'traces from one run: PyTorch profiler JSON(.gz), rocprofv3 CSV files or JSON, rocprof stats CSV, nsys SQLite export, nvprof CSV or .nvvp, PyTorch memory snapshot, gpumem/RMM allocation log',
    )
    .option(
      '--json',
      'print JSON (schema gpumem.analyze/1): { summary: {...}, findings: [ { rule, severity, count, bytes, timeNs, estimatedSavingNs, evidence, change } ] }',
    )
    .option('--html <file>', 'also write a self-contained HTML page with a timeline of copies against kernels per stream')
    .option('--from-bench <file>', 'take the pinned copy rates for savings from a gpumem bench JSON (default: built in per device)')
    .addOption(new Option('--format <format>', 'trace format of every file').choices(['auto', ...TRACE_FORMATS]).default('auto'))
    .option('--progress', 'report reading progress on stderr for every file (default: files over 32 MiB)')
    .option('--workers <n>', 'worker threads for traces of several ranks (default: every core)', (v) => parsePositive(v, '--workers'))
    .addHelpText(
      'after',
      `
Record a trace:
  PyTorch:   with torch.profiler.profile(activities=[CPU, CUDA], profile_memory=True) as p: ...
             p.export_chrome_trace('trace.json')
  rocprofv3: rocprofv3 --runtime-trace --memory-allocation-trace -d out -- python train.py
  nsys:      nsys profile --trace=cuda,osrt python train.py && nsys export --type sqlite report1.nsys-rep

Examples:
  $ gpumem analyze trace.pt.trace.json.gz
  $ gpumem analyze out/*_memory_copy_trace.csv out/*_kernel_trace.csv out/*_hip_api_trace.csv
  $ gpumem analyze report1.sqlite --from-bench bench.json --html analysis.html
  $ gpumem analyze snapshot.json.gz --json
  $ gpumem analyze traces/          # one Kineto or nsys trace per rank: each rank, and the ranks compared`,
    )
    .action((files: string[], opts: AnalyzeCliOptions) => runAnalyze(files, opts, io));
}

async function runAnalyze(files: string[], opts: AnalyzeCliOptions, io: Io): Promise<void> {
  checkWritable(opts.html, '--html');
  const { analyzeModel, loadTraces, traceInputs } = await import('../analyze/analyze.js');
  const { RANK_FORMATS } = await import('../analyze/ranks.js');
  const { ratesForModel, ratesFromBench } = await import('../analyze/bandwidth.js');
  const { timelineOf } = await import('../analyze/timeline.js');
  const { renderAnalyzeHtml } = await import('../render/analyze-html.js');
  const { renderAnalyze } = await import('../render/analyze-text.js');
  const rates = opts.fromBench ? ratesFromBench(opts.fromBench) : undefined;
  let lastReport = 0;
  const progress = (file: string, done: number, total: number): void => {
    const now = Date.now();
    if (now - lastReport < 1000 || (total < PROGRESS_FROM && opts.progress !== true)) return;
    lastReport = now;
    const what = file.endsWith('.sqlite') || file.endsWith('.db') ? `${done} rows` : progressText(done, total);
    io.err(`reading ${file}: ${what}\n`);
  };
  const format = opts.format === 'auto' ? undefined : opts.format;
  const { inputs, notes } = traceInputs(files, format);
  const rankFormat = inputs[0]?.format;
  if (inputs.length >= 2 && rankFormat && RANK_FORMATS.includes(rankFormat) && inputs.every((x) => x.format === rankFormat)) {
    // a single trace's notes go into its result; the ranks' result has no place for the folder's
    for (const n of notes) io.err(`note: ${n}\n`);
    // several whole-run traces of one profiler: one per rank (or process), analysed each on its own and compared
    if (opts.html) throw new UsageError("--html draws the timeline of one trace: give one rank's file with --html");
    const { analyzeRanks } = await import('../analyze/ranks.js');
    const { renderRanks } = await import('../render/analyze-ranks-text.js');
    const result = await analyzeRanks(
      inputs.map((x) => x.file),
      {
        format: rankFormat,
        fromBench: opts.fromBench,
        workers: opts.workers,
        progress: (done, total) => {
          if (opts.progress) io.err(`analysed ${done} of ${total} ranks\n`);
        },
      },
    );
    io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderRanks(result, { width: outputWidth() })}\n`);
    return;
  }
  const model = await loadTraces(files, { format, progress });
  // a snapshot's pool replay what-ifs are findings too: the snapshot is read again (with stacks for its page, whose
  // what-ifs need the full replay with the smallest device; the findings need only each configuration's peak)
  const page = opts.html !== undefined && inputs.length === 1 && inputs[0]!.format === 'memory-snapshot';
  const snapshots: Array<{ snap: PytorchSnapshot; replays: Map<number, ReplayReport> | undefined }> = [];
  for (const { file } of inputs.filter((x) => x.format === 'memory-snapshot')) {
    const { readPytorchSnapshot } = await import('../formats/pytorch-snapshot.js');
    const { replaysOf, whatIfOf, whatIfsOf } = await import('../replay/what-if.js');
    const snap = await readPytorchSnapshot(file, { stacks: page, progress: (n) => progress(file, n, statSync(file).size) });
    const replays = page ? replaysOf(snap) : undefined;
    const whatIfs = replays ? [...replays.values()].map(whatIfOf) : whatIfsOf(snap);
    for (const w of whatIfs) if (w) model.whatIfs.push(w);
    snapshots.push({ snap, replays });
  }
  const result = analyzeModel(model, rates ?? ratesForModel(model));
  if (page) {
    // a snapshot's page: its memory timeline, segments and replay what-ifs per GPU
    const { snapshotView } = await import('../replay/memory-timeline.js');
    const { renderSnapshotHtml } = await import('../render/snapshot-html.js');
    writeFileSync(opts.html!, renderSnapshotHtml(result, snapshotView(snapshots[0]!.snap, snapshots[0]!.replays)));
    io.err(`wrote ${opts.html}\n`);
  } else if (opts.html) {
    writeFileSync(opts.html, renderAnalyzeHtml(result, timelineOf(model)));
    io.err(`wrote ${opts.html}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderAnalyze(result, { width: outputWidth() })}\n`);
}
