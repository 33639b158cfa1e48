/**
 * Every rule, by id, in the order their findings are explained. Each rule is a check in its own file; the id is
 * stamped on its findings here, once. A rule returns a finding, nothing, or a reason it cannot judge this trace.
 * Savings come from the trace's own figures and the stated copy rates, never guessed; where a saving is an upper
 * bound or overlaps another rule's, its `savingHow` says so.
 */
import type { AnalysisContext } from '../context.js';
import { Api, Direction } from '../model.js';
import type { Finding } from '../result.js';
import { allocationChurn } from './alloc-churn.js';
import { exposedCopy } from './exposed-copy.js';
import { fragmentation } from './fragmentation.js';
import { gpuIdleOnMemory } from './gpu-idle-on-memory.js';
import { lowBandwidth } from './low-bandwidth.js';
import { managedFaults } from './managed-faults.js';
import { pageableCopies } from './pageable-copy.js';
import { redundantCopy } from './redundant-copy.js';
import type { RuleCheck } from './shared.js';
import { smallCopies } from './small-copies.js';
import { syncCopy } from './sync-copy.js';
import { syncStorm } from './sync-storm.js';

export { RECURRING, SMALL_COPY_BYTES, SMALL_COPY_COUNT, SYNC_STORM_COUNT } from './shared.js';

const CHECKS: ReadonlyArray<readonly [string, RuleCheck]> = [
  ['pageable-copy', pageableCopies(Direction.HtoD)],
  ['sync-copy', syncCopy],
  ['d2h-to-pageable', pageableCopies(Direction.DtoH)],
  ['small-copies', smallCopies],
  ['exposed-copy', exposedCopy],
  ['sync-storm', syncStorm],
  ['alloc-churn', allocationChurn([Api.malloc, Api.free], false)],
  ['pinned-alloc-churn', allocationChurn([Api.hostAlloc, Api.hostFree], true)],
  ['managed-faults', managedFaults],
  ['redundant-copy', redundantCopy],
  ['low-bandwidth', lowBandwidth],
  ['gpu-idle-on-memory', gpuIdleOnMemory],
  ['fragmentation', fragmentation],
];

export interface Rule {
  id: string;
  run(ctx: AnalysisContext): Finding | { notApplicable: string } | undefined;
}

/** The rules, each stamping its id on the finding it returns. */
export const RULES: readonly Rule[] = CHECKS.map(([id, check]) => ({
  id,
  run(ctx) {
    const out = check(ctx);
    if (!out || 'notApplicable' in out) return out;
    return { rule: id, ...out };
  },
}));
