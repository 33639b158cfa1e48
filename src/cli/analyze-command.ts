/** `gpumem analyze FILE...`: findings from profiler and allocator traces. Loads no GPU library. */
import { writeFileSync } from 'node:fs';
import { analyzeModel, loadTraces, type TraceFormat } from '../analyze/analyze.js';
import { defaultRates, ratesFromBench } from '../analyze/bandwidth.js';
import { timelineOf } from '../analyze/timeline.js';
import { renderAnalyzeHtml } from '../report/analyze-html.js';
import { renderAnalyze } from '../report/analyze-text.js';
import type { Io } from './commands.js';

export interface AnalyzeCliOptions {
  json?: boolean;
  html?: string;
  fromBench?: string;
  format?: TraceFormat | 'auto';
  progress?: boolean;
}

/** Files this big (bytes) get progress lines on stderr even when stderr is not a terminal. */
const PROGRESS_FROM = 32 * 2 ** 20;

export async function runAnalyze(files: string[], opts: AnalyzeCliOptions, io: Io): Promise<void> {
  const rates = opts.fromBench ? ratesFromBench(opts.fromBench) : undefined;
  let lastReport = 0;
  const progress = (file: string, done: number, total: number): void => {
    const now = Date.now();
    if (now - lastReport < 1000 || (total < PROGRESS_FROM && opts.progress !== true)) return;
    lastReport = now;
    const what = file.endsWith('.sqlite') || file.endsWith('.db') ? `${done} rows` : `${Math.min(100, (100 * done) / total).toFixed(0)}% of ${(total / 2 ** 20).toFixed(0)} MiB${done > total ? ' (decompressed)' : ''}`;
    io.err(`reading ${file}: ${what}\n`);
  };
  const model = await loadTraces(files, { format: opts.format === 'auto' ? undefined : opts.format, progress });
  const result = analyzeModel(model, rates ?? defaultRates([...model.devices.values()][0]));
  if (opts.html) {
    writeFileSync(opts.html, renderAnalyzeHtml(result, timelineOf(model)));
    io.err(`wrote ${opts.html}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderAnalyze(result)}\n`);
}
