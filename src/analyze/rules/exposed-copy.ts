/** exposed-copy: copies the GPU waits for instead of overlapping them with compute. */
import { formatNs } from '../../units.js';
import { unionLength } from '../intervals.js';
import { Direction } from '../model.js';
import { basisOf, pct, severityOf, sum, type RuleCheck } from './shared.js';

export const exposedCopy: RuleCheck = (ctx) => {
  if (ctx.model.kernels.length === 0) return ctx.copyCount > 0 ? { notApplicable: 'the trace has no kernels to overlap copies with' } : undefined;
  const c = ctx.model.copies;
  const idx: number[] = [];
  let outside = 0;
  for (let i = 0; i < c.length; i++) {
    if (c.get(i, 'dir') !== Direction.HtoD && c.get(i, 'dir') !== Direction.DtoH) continue;
    // only copies inside the compute phase: uploads before the first kernel or after the last are setup or teardown
    const busy = ctx.kernelBusy.get(c.get(i, 'device'));
    if (busy && c.get(i, 'end') > busy.start[0]! && c.get(i, 'start') < busy.end[busy.end.length - 1]!) idx.push(i);
    else outside++;
  }
  if (idx.length === 0) return undefined;
  const timeNs = sum(idx, (i) => c.get(i, 'end') - c.get(i, 'start'));
  const overlapped = sum(idx, (i) => ctx.overlapNs(i));
  const exposed = timeNs - overlapped;
  if (exposed < Math.max(1e6, 0.02 * ctx.spanNs)) return undefined;
  const kernelBusy = [...ctx.kernelBusy.values()].reduce((s, u) => s + unionLength(u), 0);
  const saving = Math.max(0, Math.min(exposed, kernelBusy - overlapped));
  const copyStreams = new Set(idx.map((i) => c.get(i, 'stream')));
  const kernelStreams = new Set(Array.from(ctx.model.kernels.col('stream')));
  const shared = [...copyStreams].filter((s) => kernelStreams.has(s));
  const evidence = [
    `${idx.length} host copies during the compute phase took ${formatNs(timeNs)}; ${formatNs(exposed)} (${pct(exposed, timeNs)}) of it ran while no kernel ran on the device`,
    shared.length === copyStreams.size
      ? `copies and kernels share stream${shared.length > 1 ? 's' : ''} ${shared.join(', ')}: a one-stream pipeline runs them one after the other`
      : `copies run on stream(s) ${[...copyStreams].join(', ')}, kernels on ${[...kernelStreams].join(', ')}, yet the copies are not hidden: the next batch is not fetched while the current one computes`,
  ];
  if (outside > 0) evidence.push(`${outside} copies before the first kernel or after the last are setup or teardown and not counted`);
  return {
    severity: severityOf(saving, ctx.spanNs),
    title: 'Copies are not overlapped with compute',
    count: idx.length,
    bytes: sum(idx, (i) => c.get(i, 'bytes')) || null,
    timeNs,
    estimatedSavingNs: saving,
    basis: basisOf(c, idx),
    savingHow: `the copies' time outside kernels, capped by the kernel time (${formatNs(kernelBusy)}) not already overlapped: what double-buffering could hide`,
    evidence,
    change:
      'Copy the next batch on a side stream while the current step computes (pinned memory, non_blocking=True, torch.cuda.Stream with wait_stream / record_stream, or a DataLoader prefetcher): double-buffer the input.',
  };
};
