/**
 * The arguments of a HIP call as legacy rocprof (v1) writes them beside the call in results.db (`HIP.args`) and
 * results.json (`args.args`): "( dst(0x7f28b1200000) src(0x7f6a9acb7010) sizeBytes(8388608) kind(1))". Its copy
 * records carry no size: the size, the host address and the direction of a copy are those of the call that made it.
 */
import { AllocLevel, Api, Direction, type TraceModel } from '../model.js';

export interface HipCallArgs {
  /** sizeBytes(N); NaN where the call has none (2D copies, typed memsets). */
  bytes: number;
  dst: number;
  src: number;
  /** The copy's direction by its hipMemcpyKind (0 HtoH, 1 HtoD, 2 DtoH, 3 DtoD); unknown for 4 (default) or none. */
  dir: number;
}

const KINDS = [Direction.HtoH, Direction.HtoD, Direction.DtoH, Direction.DtoD];

/** One argument's value: a decimal count or a 0x address, NaN where absent or beyond 2^53. */
function arg(text: string, name: string): number {
  const m = new RegExp(`\\b${name}\\((0x[0-9a-fA-F]{1,14}|\\d{1,16})\\)`).exec(text);
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return Number.isSafeInteger(v) ? v : Number.NaN;
}

/** What the argument text of a HIP call says of the memory it copies or sets. */
export function hipCallArgs(text: string): HipCallArgs {
  const kind = arg(text, 'kind');
  return { bytes: arg(text, 'sizeBytes'), dst: arg(text, 'dst'), src: arg(text, 'src'), dir: KINDS[kind] ?? Direction.unknown };
}

/**
 * The allocations and frees HIP calls record in their arguments (hipMalloc's and hipHostMalloc's ptr(...) size(...),
 * hipHostRegister's hostPtr(...) sizeBytes(...), the frees' ptr(...)), as the driver's allocation events: with them a
 * copy's host address tells pinned memory from pageable (infer.ts). A free's size is its allocation's.
 */
export class HipAllocations {
  private readonly live = new Map<number, { bytes: number; host: number }>();
  recorded = 0;

  constructor(private readonly model: TraceModel) {}

  /** Records what the call `name` (classified as `api`) with argument text `text` allocated or freed at `time`. */
  call(api: number, name: string, text: string, time: number): void {
    const register = /^hipHostRegister$/.test(name);
    const unregister = /^hipHostUnregister$/.test(name);
    if (api === Api.malloc || api === Api.hostAlloc || register) {
      const address = arg(text, register ? 'hostPtr' : 'ptr');
      const bytes = arg(text, register ? 'sizeBytes' : 'size');
      if (Number.isNaN(address) || !(bytes > 0)) return;
      const host = api === Api.malloc ? 0 : 1;
      this.live.set(address, { bytes, host });
      this.push(time, bytes, address, host);
    } else if (api === Api.free || api === Api.hostFree || unregister) {
      const address = arg(text, unregister ? 'hostPtr' : 'ptr');
      const had = this.live.get(address);
      if (!had) return;
      this.live.delete(address);
      this.push(time, -had.bytes, address, had.host);
    }
  }

  private push(time: number, bytes: number, address: number, host: number): void {
    this.recorded++;
    this.model.allocs.push({ time, bytes, device: -1, address, allocated: Number.NaN, reserved: Number.NaN, host, agent: -1, level: AllocLevel.driver });
  }
}

/** A copy or fill record, and a call that may have made it. */
export interface TimedOp {
  start: number;
  end: number;
  dir: number;
  thread: number;
}

/** Calls less those that enclose another call of their thread (hipMemcpyToSymbol around its hipMemcpy). */
function innermost(calls: readonly TimedOp[]): number[] {
  const order = calls.map((_, i) => i).sort((a, b) => calls[a]!.start - calls[b]!.start || calls[b]!.end - calls[a]!.end);
  const enclosing = new Set<number>();
  const open = new Map<number, number[]>();
  for (const i of order) {
    const c = calls[i]!;
    const stack = open.get(c.thread) ?? [];
    while (stack.length && calls[stack[stack.length - 1]!]!.end < c.start) stack.pop();
    for (const j of stack) if (calls[j]!.end >= c.end) enclosing.add(j);
    stack.push(i);
    open.set(c.thread, stack);
  }
  return order.filter((i) => !enclosing.has(i));
}

/**
 * Pairs copy records with the calls that made them where nothing links the two but order (results.json): each copy,
 * in the order copies started, takes the oldest unpaired call of its direction (a call of the default kind fits
 * any) that started before the copy ended. Order, not containment, because the GPU's clock and the host's are
 * aligned only roughly: a synchronous copy can be stamped as starting before its own call did. Returns, per copy,
 * the index of its call or -1.
 */
export function pairCopiesWithCalls(copies: readonly TimedOp[], calls: readonly TimedOp[]): number[] {
  const byStart = innermost(calls);
  const used = new Set<number>();
  const out = copies.map(() => -1);
  const fits = (c: TimedOp, x: TimedOp): boolean => c.dir === Direction.unknown || x.dir === Direction.unknown || c.dir === x.dir;
  let oldest = 0;
  for (const k of copies.map((_, i) => i).sort((a, b) => copies[a]!.start - copies[b]!.start)) {
    const x = copies[k]!;
    while (oldest < byStart.length && used.has(byStart[oldest]!)) oldest++;
    for (let j = oldest; j < byStart.length && calls[byStart[j]!]!.start <= x.end; j++) {
      const i = byStart[j]!;
      if (used.has(i) || !fits(calls[i]!, x)) continue;
      used.add(i);
      out[k] = i;
      break;
    }
  }
  return out;
}
