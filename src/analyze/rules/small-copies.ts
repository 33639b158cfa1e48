/** small-copies: many small copies, each paying the per-copy cost. */
import { formatBytes, formatNs } from '../../units.js';
import { coveredWithin } from '../intervals.js';
import { Direction } from '../model.js';
import { basisOf, cappedAtMedian, joinBasis, opsOf, severityOf, sizeList, SMALL_COPY_BYTES, SMALL_COPY_COUNT, sum, type RuleCheck } from './shared.js';

/** The runtime calls that issued copies `idx`, where the trace links them. */
function issuing(ctx: Parameters<RuleCheck>[0], idx: readonly number[]): number[] {
  const out: number[] = [];
  for (const i of idx) {
    const r = ctx.runtimeByCorrelation.get(ctx.model.copies.get(i, 'correlation'));
    if (r !== undefined) out.push(r);
  }
  return out;
}

export const smallCopies: RuleCheck = (ctx) => {
  const c = ctx.model.copies;
  const idx: number[] = [];
  for (let i = 0; i < c.length; i++) {
    const b = c.get(i, 'bytes');
    if (b < SMALL_COPY_BYTES && (c.get(i, 'dir') === Direction.HtoD || c.get(i, 'dir') === Direction.DtoH)) idx.push(i);
  }
  if (idx.length < SMALL_COPY_COUNT) {
    // judged on the copies with sizes; only a trace with no sized copy at all cannot be judged
    let sized = 0;
    for (let i = 0; i < c.length && sized === 0; i++) if (!Number.isNaN(c.get(i, 'bytes'))) sized++;
    return c.length > 0 && sized === 0 ? { notApplicable: 'the trace does not record copy sizes' } : undefined;
  }
  if (!Number.isFinite(ctx.pinnedRate(Direction.HtoD))) return { notApplicable: 'no copy rate to price a batched copy with (pass --from-bench)' };
  idx.sort((a, b) => c.get(a, 'start') - c.get(b, 'start'));
  // bursts: runs of small copies in one direction with no kernel between them; batched, each is one copy
  const bursts: Array<{ dir: number; bytes: number; n: number }> = [];
  let prev = -1;
  for (const i of idx) {
    const dir = c.get(i, 'dir');
    const last = bursts[bursts.length - 1];
    const kernelBetween = prev >= 0 && coveredWithin(ctx.kernelBusy.get(c.get(i, 'device')) ?? ctx.allKernels, c.get(prev, 'end'), c.get(i, 'start')) > 0;
    if (!last || last.dir !== dir || kernelBetween) bursts.push({ dir, bytes: c.get(i, 'bytes'), n: 1 });
    else {
      last.bytes += c.get(i, 'bytes');
      last.n++;
    }
    prev = i;
  }
  const deviceNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
  const issueNs = sum(idx, (i) => ctx.issueNs(i));
  const bytes = sum(idx, (i) => c.get(i, 'bytes'));
  // a call that waited for earlier GPU work (a pageable copy, a full queue) waits as long inside a batch
  const issue = cappedAtMedian(idx.map((i) => ctx.issueNs(i)));
  const batched = bursts.reduce((s, b) => s + ctx.floorNs[b.dir]! + b.bytes / ctx.pinnedRate(b.dir) + issue.capNs, 0);
  const saving = Math.max(0, deviceNs + issue.sumNs - batched);
  // copies that already cost no more than one batched copy would: nothing to gain
  if (saving <= 0) return undefined;
  const sizes = new Map<number, number>();
  for (const i of idx) sizes.set(c.get(i, 'bytes'), (sizes.get(c.get(i, 'bytes')) ?? 0) + 1);
  const evidence = [
    `${idx.length} copies under ${formatBytes(SMALL_COPY_BYTES)}: ${sizeList(sizes)}; ${formatBytes(bytes)} in all`,
    `${formatNs(deviceNs)} on the copy engine${issueNs > 0 ? ` and ${formatNs(issueNs)} in the runtime calls that issued them` : ''}: ${formatNs((deviceNs + issueNs) / idx.length)} per copy for ${formatBytes(bytes / idx.length)} on average`,
    `they fall into ${bursts.length} bursts between kernels; batched, each burst is one copy`,
  ];
  if (issue.over > 0)
    evidence.push(
      `${issue.over} of the issuing calls took more than twice the median call (${formatNs(issue.capNs)}): the ${formatNs(issue.excessNs)} beyond the median is waiting for earlier GPU work, which batching does not save, and is left out`,
    );
  const ops = opsOf(ctx, idx);
  if (ops) evidence.push(`issued by ${ops}`);
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Many small copies: batch them',
    count: idx.length,
    bytes,
    timeNs: deviceNs + issueNs,
    estimatedSavingNs: saving,
    basis: joinBasis(basisOf(c, idx), basisOf(ctx.model.runtime, issuing(ctx, idx))),
    savingHow: `copy-engine time of the small copies plus their issuing calls, each call counted at most at the median call (${formatNs(issue.capNs)}; time beyond it is waiting, not issuing), minus one copy per burst (${bursts.length}): ${ctx.floorText(Direction.HtoD)}, the burst's bytes at the pinned rate, and one median issuing call`,
    evidence,
    change: `Pack small tensors into one buffer (torch.cat into a preallocated pinned staging tensor, or one struct) and copy it once per step; keep scalars such as counters, masks or learning rates on the device instead of uploading them. Where they cannot be packed, enqueue them with one batch call (${ctx.api('cudaMemcpyBatchAsync from CUDA 12.8', 'hipMemcpyBatchAsync from ROCm 7.1')}; gpumem rt.copyBatch) or capture the step's copies once as a graph (${ctx.api('CUDA graphs', 'HIP graphs')}, torch.cuda.graphs; gpumem rt.capture).`,
  };
};
