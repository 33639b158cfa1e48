/**
 * `gpumem report`, gpumem's main job: what this machine's memory system is (info), what it measures (a quick
 * bench), and which memory to use for training, inference and preprocessing (advice tied to the figures).
 */
import type { Runtime } from '../runtime/runtime.js';
import { runBench } from '../bench/run-bench.js';
import type { BenchOptions } from '../bench/context.js';
import type { BenchReport } from '../formats/bench-schema.js';
import { adviseDeviceWithheld, type Advice, type Withheld } from './advice.js';
import { collectInfo, type InfoReport } from './info.js';
import { NATIVE_AGREEMENT } from './native-agreement.js';

export interface Report {
  schema: 'gpumem.report/1';
  backend: string;
  /** Set on the host backend: the figures are CPU memory, not a GPU's, and no strategy is drawn from them. */
  hostNotice?: string;
  info: InfoReport;
  bench: BenchReport;
  /** Per device: the advice, and the rows its rules left out because their kind differed from native CUDA C. */
  advice: Array<{ device: number; items: Advice[]; withheld: Withheld[] }>;
  /** The published comparison with native CUDA C that decides which kinds of row the advice may quote. */
  nativeComparison: { machine: string; measured: string; evidence: string };
}

/** What the report says on the host backend, in place of a strategy. */
export const HOST_NOTICE =
  'No GPU was found: this report ran on the host backend, so every figure below is CPU memory standing in for a device. A GPU strategy (pinned or pageable staging, batching, managed memory, pools) needs GPU figures: run gpumem report on a machine with a GPU (cuda or hip backend).';

/** Runs the quick bench and draws the strategy from it, per device. */
export async function buildReport(rt: Runtime, options: Omit<BenchOptions, 'quick'>): Promise<Report> {
  const info = collectInfo(rt);
  const bench = await runBench(rt, { ...options, quick: true });
  const host = !rt.backend.capabilities.gpuMemory;
  // CPU memcpy figures say nothing about PCIe copies, pinned memory or page migration: advice drawn from them would
  // contradict itself and change from run to run. The host backend prints its measurements and no strategy.
  const advice = host
    ? []
    : info.devices
        .filter((d) => bench.environment.devices.some((e) => e.index === d.index))
        .map((d) => ({ device: d.index, ...adviseDeviceWithheld(d, bench) }));
  const { machine, measured, evidence } = NATIVE_AGREEMENT;
  const report: Report = { schema: 'gpumem.report/1', backend: rt.backend.name, info, bench, advice, nativeComparison: { machine, measured, evidence } };
  if (host) report.hostNotice = HOST_NOTICE;
  return report;
}
