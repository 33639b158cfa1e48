/**
 * What a trace leaves unsaid, inferred from what it does say, and nothing more: the type of an allocation's agent
 * (rocprofv3 names agents; copy directions and agent_info say which are CPUs), and whether a copy's host memory was
 * pinned, from the address ranges of pinned allocations live at the copy's time.
 */
import { Direction, MemKind, type TraceModel } from './model.js';

interface Range {
  lo: number;
  hi: number;
  from: number;
  to: number;
}

/** Resolves agent types and pinned host memory in place, and notes what could not be known. */
export function inferHostKinds(model: TraceModel): void {
  const a = model.allocs;
  for (let i = 0; i < a.length; i++) {
    const agent = a.get(i, 'agent');
    if (!Number.isNaN(a.get(i, 'host')) || agent < 0) continue;
    const type = model.agentType(model.agentNames[agent] ?? '');
    if (type) a.set(i, 'host', type === 'CPU' ? 1 : 0);
  }
  // pinned ranges: host allocations from the driver, each live until a free of the same address
  const ranges: Range[] = [];
  const open = new Map<number, Range>();
  for (let i = 0; i < a.length; i++) {
    const addr = a.get(i, 'address');
    const bytes = a.get(i, 'bytes');
    if (Number.isNaN(addr)) continue;
    if (bytes > 0 && a.get(i, 'host') === 1 && a.get(i, 'level') === 1) {
      const r = { lo: addr, hi: addr + bytes, from: a.get(i, 'time'), to: Infinity };
      ranges.push(r);
      open.set(addr, r);
    } else if (bytes <= 0 && open.has(addr)) {
      open.get(addr)!.to = a.get(i, 'time');
      open.delete(addr);
    }
  }
  const c = model.copies;
  let inferredPinned = 0;
  let inferredPageable = 0;
  let withAddress = 0;
  for (let i = 0; i < c.length; i++) {
    const dir = c.get(i, 'dir');
    const side = dir === Direction.HtoD ? 'src' : dir === Direction.DtoH ? 'dst' : undefined;
    if (!side || c.get(i, side) !== MemKind.unknown) continue;
    const addr = c.get(i, 'hostAddr');
    if (Number.isNaN(addr)) continue;
    withAddress++;
    if (ranges.length === 0) continue;
    const t = c.get(i, 'start');
    const pinned = ranges.some((r) => addr >= r.lo && addr < r.hi && t >= r.from && t <= r.to);
    c.set(i, side, pinned ? MemKind.pinned : MemKind.pageable);
    if (pinned) inferredPinned++;
    else inferredPageable++;
    model.hostKindUnknown--;
  }
  if (inferredPinned + inferredPageable > 0)
    model.note(
      `host memory kind inferred for ${inferredPinned + inferredPageable} copies from the address ranges of ${ranges.length} pinned host allocations: ${inferredPinned} pinned, ${inferredPageable} pageable (outside every pinned range)`,
    );
  if (model.hostKindUnknown > 0) {
    const amd = model.vendor() === 'amd';
    const record = amd ? 'rocprofv3 --memory-allocation-trace' : 'nsys --cuda-memory-usage=true, or torch.profiler with profile_memory=True';
    const why =
      withAddress > 0
        ? `their host addresses are known but the trace holds no pinned host allocations to compare them with (record allocations too: ${record})`
        : ranges.length > 0
          ? `the trace has ${ranges.length} pinned host allocations but the copies carry no host address to compare with them`
          : `the trace does not say whether host memory was pinned${amd ? ' (ROCm traces do not)' : ''} and has no allocation addresses to infer it from`;
    model.note(`${model.hostKindUnknown} host copies of unknown host memory kind: ${why}; pageable-copy and d2h-to-pageable cannot judge them`);
  }
}
