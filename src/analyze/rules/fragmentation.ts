/** fragmentation: reserved memory that allocations cannot use. */
import { formatBytes, MiB, GiB } from '../../units.js';
import { pct, type RuleCheck } from './shared.js';

export const fragmentation: RuleCheck = (ctx) => {
  const m = ctx.model;
  const seg = m.segments;
  let reserved = 0;
  let allocated = 0;
  let inactive = 0;
  let blocks = 0;
  for (const s of seg) {
    reserved += s.totalBytes;
    allocated += s.allocatedBytes;
    inactive += s.inactiveSplitBytes;
    blocks += s.inactiveSplitBlocks;
  }
  // Kineto [memory] events: the caching allocator's totals over time
  let peakReserved = 0;
  let peakAllocated = 0;
  const a = m.allocs;
  for (let i = 0; i < a.length; i++) {
    if (a.get(i, 'reserved') > peakReserved) peakReserved = a.get(i, 'reserved');
    if (a.get(i, 'allocated') > peakAllocated) peakAllocated = a.get(i, 'allocated');
  }
  const evidence: string[] = [];
  let held = 0;
  let how = '';
  if (seg.length > 0 && reserved > 0) {
    evidence.push(`${seg.length} segments reserve ${formatBytes(reserved)} for ${formatBytes(allocated)} allocated (${pct(allocated, reserved)})`);
    if (inactive > 0)
      evidence.push(
        `${formatBytes(inactive)} sits in ${blocks} free blocks inside segments that also hold live blocks: split blocks no request of another size can use`,
      );
    held = inactive;
    how = 'free blocks stranded inside segments that hold live blocks';
  }
  if (peakReserved > 0 && peakAllocated > 0) {
    evidence.push(
      `the caching allocator peaked at ${formatBytes(peakReserved)} reserved for ${formatBytes(peakAllocated)} allocated (${pct(peakAllocated, peakReserved)})`,
    );
    if (peakReserved - peakAllocated > held) {
      held = peakReserved - peakAllocated;
      how = 'peak reserved beyond peak allocated';
    }
  }
  if (m.ooms > 0) evidence.push(`${m.ooms} out-of-memory events`);
  const bad = m.ooms > 0 || (held >= 64 * MiB && (held >= 0.1 * Math.max(reserved, peakReserved) || held >= GiB));
  if (!bad) return undefined;
  return {
    severity: m.ooms > 0 ? 'high' : held >= GiB ? 'medium' : 'low',
    title: 'The allocator holds memory it cannot use',
    count: blocks || m.ooms,
    bytes: held,
    timeNs: 0,
    estimatedSavingNs: 0,
    savingHow: `memory, not time: ${formatBytes(held)} of ${how || 'memory reserved and unusable'}`,
    evidence,
    change:
      "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or use gpumem's growable pool) so segments grow in place instead of splitting; compare configurations on this very trace with `gpumem pool replay SNAPSHOT`.",
  };
};
