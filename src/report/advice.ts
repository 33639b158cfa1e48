/**
 * The strategy advice of `gpumem report`: for training, inference and data preprocessing, which memory kind to use
 * for what on this machine. Every recommendation is derived from a measured figure and carries it as evidence, with
 * the run it came from and how that kind of row compared with native CUDA C (./fidelity.ts). A rule whose figures
 * were not measured, or whose row's kind differed from native C in the published comparison, gives no advice; the
 * rows left out that way are listed. The rules live in advice-*.ts, one file per part of the machine; each reads its
 * rows through ./figures.ts, which withholds what may not be quoted.
 */
import type { DeviceInfo } from '../backend/backend.js';
import type { BenchReport } from '../formats/bench-schema.js';
import { copyAdvice } from './advice-copies.js';
import type { NativeAgreement } from './fidelity.js';
import { linkAdvice } from './advice-links.js';
import { memoryAdvice } from './advice-memory.js';
import { transferAdvice } from './advice-transfer.js';
import { figuresFor, type Advice, type Evidence, type RuleContext, type Withheld } from './figures.js';

export type { Advice, Evidence, Withheld, Workload } from './figures.js';

/** The rules, in the order their advice is listed. */
const RULES: ReadonlyArray<(c: RuleContext) => void> = [copyAdvice, transferAdvice, memoryAdvice, linkAdvice];

/** Derives the advice for one device from its info and bench rows. */
export function adviseDevice(info: DeviceInfo, bench: BenchReport): Advice[] {
  return adviseDeviceWithheld(info, bench).items;
}

/** The advice for one device, and the rows its rules left out because their kind differed from native C (in `table`, the published comparison by default). */
export function adviseDeviceWithheld(info: DeviceInfo, bench: BenchReport, table?: NativeAgreement): { items: Advice[]; withheld: Withheld[] } {
  const F = figuresFor(info, bench, table);
  const items: Advice[] = [];
  const add: RuleContext['add'] = (a) => items.push({ ...a, evidence: a.evidence.filter((e): e is Evidence => !!e) });
  for (const rule of RULES) rule({ info, bench, F, add });
  return { items, withheld: F.withheld };
}
