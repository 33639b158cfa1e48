/**
 * `gpumem report`, gpumem's main job: what this machine's memory system is (info), what it measures (a quick
 * bench), and which memory to use for training, inference and preprocessing (advice tied to the figures).
 */
import type { Runtime } from '../memory/runtime.js';
import { runBench } from '../bench/run-bench.js';
import type { BenchOptions } from '../bench/context.js';
import type { BenchReport } from '../bench/schema.js';
import { adviseDevice, type Advice } from './advice.js';
import { collectInfo, type InfoReport } from './info.js';

export interface Report {
  schema: 'gpumem.report/1';
  backend: string;
  /** Set on the host backend: the figures are CPU memory, not a GPU's. */
  hostNotice?: string;
  info: InfoReport;
  bench: BenchReport;
  advice: Array<{ device: number; items: Advice[] }>;
}

export async function buildReport(rt: Runtime, options: Omit<BenchOptions, 'quick'>): Promise<Report> {
  const info = collectInfo(rt);
  const bench = await runBench(rt, { ...options, quick: true });
  const advice = info.devices
    .filter((d) => bench.environment.devices.some((e) => e.index === d.index))
    .map((d) => ({ device: d.index, items: adviseDevice(d, bench) }));
  const report: Report = { schema: 'gpumem.report/1', backend: rt.backend.name, info, bench, advice };
  if (rt.backend.name === 'host') {
    report.hostNotice =
      'No GPU was found: this report ran on the host backend. Every figure is CPU memory standing in for a device, and the advice below follows from those figures, not from a GPU. Run it on a machine with a GPU (cuda or hip backend) for the real table.';
  }
  return report;
}
