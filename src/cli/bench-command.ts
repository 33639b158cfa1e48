/** `gpumem bench`: this machine's table of bandwidth and latency. Ctrl-C stops after the current measurement. */
import { writeFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { outputWidth } from '../render/width.js';
import { checkWritable, interruptible, withRuntime, type Io } from './context.js';
import { Interrupted } from './errors.js';
import { backendOption, collectInts, parseSizeOption, WIDE_HELP, type BenchCliOptions } from './options.js';

export function defineBench(program: Command, io: Io): void {
  program
    .command('bench')
    .description(
      "measure this machine's memory: copies of every kind and direction, peer copies, collectives across the GPUs (NCCL / RCCL), managed and zero-copy memory, STREAM, cache sweep, access patterns, latency, allocation",
    )
    .addOption(backendOption())
    .option('--quick', 'fewer sizes and repeats (under 30 s on one GPU); default is the full run')
    .option('--device <n...>', 'devices to measure, each once (default: all)', collectInts('--device', { distinct: true }), undefined)
    .option('--only <test...>', 'run only these tests: copy, sm-copy, peer, collectives, managed, zero-copy, stream, cache, access, latency, alloc, transfer')
    .option('--max-size <size>', 'largest copy / working set, 64KiB or more, e.g. 64MiB (default 256 MiB quick, 1 GiB full)', (v) => {
      const n = parseSizeOption(v, '--max-size');
      if (n < 64 * 1024) throw new InvalidArgumentError(`--max-size must be at least 64KiB, the smallest working set every test runs with; got "${v}"`);
      return n;
    })
    .option(
      '--gated',
      'time device work only: each run waits behind a kernel until it is fully enqueued (default: time as a native program does, submission included)',
    )
    .option('--json', 'print JSON (schema gpumem.bench/1)')
    .option('--wide', WIDE_HELP)
    .option('--html <file>', 'also write a self-contained HTML page with charts')
    .addHelpText(
      'after',
      '\nExamples:\n  $ gpumem bench --quick\n  $ gpumem bench --quick --wide > bench.txt     every column, however wide\n  $ gpumem bench --only copy stream --json > bench.json\n  $ gpumem bench --device 0 1 --only peer --html peer.html\n  $ gpumem bench --only collectives --quick\n\nBandwidth is GB/s with GB = 1e9 bytes; each row says how bytes were counted. Ctrl-C stops and frees everything.',
    )
    .action((opts: BenchCliOptions) => runBenchCommand(opts, io));
}

async function runBenchCommand(opts: BenchCliOptions, io: Io): Promise<void> {
  checkWritable(opts.html, '--html');
  const { runBench } = await import('../bench/run-bench.js');
  const { BenchAborted } = await import('../bench/context.js');
  const { renderBench } = await import('../render/bench-text.js');
  await withRuntime({ ...opts, transfers: true }, io, (rt) =>
    interruptible(
      io,
      (e) => e instanceof BenchAborted,
      async (signal) => {
        const report = await runBench(rt, {
          quick: !!opts.quick,
          devices: opts.device,
          only: opts.only,
          maxBytes: opts.maxSize,
          gated: opts.gated,
          signal,
          progress: (m) => io.err(`${m}\n`),
        });
        if (opts.html) {
          const { benchHtml } = await import('../render/bench-html.js');
          writeFileSync(opts.html, benchHtml(report));
          io.err(`wrote ${opts.html}\n`);
        }
        io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderBench(report, { width: opts.wide ? undefined : outputWidth() })}\n`);
        if (report.environment.interrupted) {
          io.err(`interrupted: the ${report.results.length} row(s) above finished before it; every allocation was freed\n`);
          throw new Interrupted();
        }
      },
    ),
  );
}
