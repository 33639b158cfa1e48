/** `gpumem report`: the main job — what this machine's memory system is, measured, and which strategy to use. */
import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { outputWidth } from '../render/width.js';
import { checkWritable, interruptible, withRuntime, type Io } from './context.js';
import { backendOption, collectInts, parseSizeOption, WIDE_HELP, type BenchCliOptions } from './options.js';

export function defineReport(program: Command, io: Io): void {
  program
    .command('report')
    .description("the main job: this machine's memory system (info), a quick bench, and which memory to use for training, inference and preprocessing")
    .addOption(backendOption())
    .option('--device <n...>', 'devices to measure (default: all)', collectInts('--device'), undefined)
    .option('--max-size <size>', 'largest copy / working set of the quick bench (default 256 MiB)', (v) => parseSizeOption(v, '--max-size'))
    .option('--json', 'print JSON (schema gpumem.report/1): info, bench and advice')
    .option('--wide', WIDE_HELP)
    .option('--html <file>', 'also write a self-contained HTML page')
    .addHelpText('after', '\nExamples:\n  $ gpumem report\n  $ gpumem report --html report.html\n  $ gpumem report --json > report.json')
    .action((opts: BenchCliOptions) => runReport(opts, io));
}

async function runReport(opts: BenchCliOptions, io: Io): Promise<void> {
  checkWritable(opts.html, '--html');
  const { buildReport } = await import('../report/report.js');
  const { BenchAborted } = await import('../bench/context.js');
  const { renderReportText, renderReportHtml } = await import('../render/report-render.js');
  await withRuntime({ ...opts, transfers: true }, io, (rt) =>
    interruptible(
      io,
      (e) => e instanceof BenchAborted,
      async (signal) => {
        const report = await buildReport(rt, { devices: opts.device, maxBytes: opts.maxSize, signal, progress: (m) => io.err(`${m}\n`) });
        if (opts.html) {
          writeFileSync(opts.html, renderReportHtml(report));
          io.err(`wrote ${opts.html}\n`);
        }
        io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderReportText(report, { width: opts.wide ? undefined : outputWidth() })}\n`);
      },
    ),
  );
}
