/**
 * Every rule, by id, in the order their findings are explained. Each rule is a check in its own file; the id is
 * stamped on its findings here, once. A rule returns a finding, nothing, or a reason it cannot judge this trace.
 * Savings come from the trace's own figures and the stated copy rates, never guessed; where a saving is an upper
 * bound or overlaps another rule's, its `savingHow` says so.
 */
import type { AnalysisContext } from '../context.js';
import { type Activity, Api, Direction } from '../model.js';
import type { Finding } from '../result.js';
import { allocationChurn } from './alloc-churn.js';
import { exposedCopy } from './exposed-copy.js';
import { fragmentation } from './fragmentation.js';
import { gpuIdleOnMemory } from './gpu-idle-on-memory.js';
import { lowBandwidth } from './low-bandwidth.js';
import { managedFaults } from './managed-faults.js';
import { pageableCopies } from './pageable-copy.js';
import { redundantCopy } from './redundant-copy.js';
import type { Basis, RuleCheck } from './shared.js';
import { smallCopies } from './small-copies.js';
import { syncCopy } from './sync-copy.js';
import { syncStorm } from './sync-storm.js';

export { RECURRING, SMALL_COPY_BYTES, SMALL_COPY_COUNT, SYNC_STORM_COUNT } from './shared.js';

/**
 * What each rule needs the trace to have recorded: every group must be met, by any activity in it. A rule whose
 * activity the profiler did not record cannot judge the trace, and says so instead of finding nothing.
 */
type Needs = ReadonlyArray<readonly Activity[]>;
const COPIES: Needs = [['copies']];

const CHECKS: ReadonlyArray<readonly [string, RuleCheck, Needs]> = [
  ['pageable-copy', pageableCopies(Direction.HtoD), COPIES],
  ['sync-copy', syncCopy, [['runtime']]],
  ['d2h-to-pageable', pageableCopies(Direction.DtoH), COPIES],
  ['small-copies', smallCopies, COPIES],
  ['exposed-copy', exposedCopy, [['copies'], ['kernels']]],
  ['sync-storm', syncStorm, [['runtime']]],
  ['alloc-churn', allocationChurn([Api.malloc, Api.free], false), [['runtime', 'allocations']]],
  ['pinned-alloc-churn', allocationChurn([Api.hostAlloc, Api.hostFree], true), [['runtime', 'allocations']]],
  ['managed-faults', managedFaults, [['faults', 'copies']]],
  ['redundant-copy', redundantCopy, COPIES],
  ['low-bandwidth', lowBandwidth, COPIES],
  ['gpu-idle-on-memory', gpuIdleOnMemory, [['kernels'], ['copies']]],
  // run on runtime calls too, to say that allocation calls alone cannot tell what the allocator reserved
  ['fragmentation', fragmentation, [['allocations', 'runtime']]],
];

/** What a profiler calls each activity, for "not recorded" reasons. */
const ACTIVITY_TEXT: Record<Activity, string> = {
  kernels: 'kernels',
  copies: 'memory copies',
  runtime: 'runtime API calls',
  allocations: 'allocations',
  faults: 'page faults',
};

/** Rules that can judge a tool's totals per name (calls and time), with no event timeline. */
const JUDGE_AGGREGATES = new Set(['sync-copy', 'sync-storm', 'alloc-churn', 'pinned-alloc-churn']);

/** A finding as the registry returns it: with its rule's id, and the events its saving rests on. */
export type RuleResult = Finding & { basis?: Basis };

export interface Rule {
  id: string;
  run(ctx: AnalysisContext): RuleResult | { notApplicable: string } | undefined;
}

/** The rules, each stamping its id on the finding it returns, or saying which activity it needed and the trace lacks. */
export const RULES: readonly Rule[] = CHECKS.map(([id, check, needs]) => ({
  id,
  run(ctx) {
    const missing = needs.find((group) => !group.some((a) => ctx.model.recorded(a)));
    if (missing) return { notApplicable: `the trace did not record ${missing.map((a) => ACTIVITY_TEXT[a]).join(' or ')}` };
    if (ctx.model.aggregatesOnly() && !JUDGE_AGGREGATES.has(id))
      return { notApplicable: 'aggregate statistics (calls and time per name) record no timeline, sizes or host memory kinds' };
    if (needs.some((g) => g.length === 1 && g[0] === 'copies') && ctx.model.copies.length === 0 && ctx.model.aggregateCopies.length > 0)
      return { notApplicable: 'the trace holds copies only as totals of the calls that asked for them: no copy timed on the GPU, no host memory kind' };
    const out = check(ctx);
    if (!out || 'notApplicable' in out) return out;
    return { rule: id, ...out, overlapsWith: [] };
  },
}));
