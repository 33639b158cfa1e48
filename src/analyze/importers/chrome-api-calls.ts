/**
 * CUDA and HIP calls in Chrome traces of tools other than the PyTorch profiler: eBPF monitors and library
 * interposers time each runtime or driver call on the host (cuMemcpyHtoD_v2 with its byte count, cudaMalloc,
 * cuLaunchKernel, cuStreamSynchronize), as complete events (ph X), begin / end pairs (B / E) or instants (i). They
 * record no GPU activity: the calls are read as runtime calls, and the copies they asked for as totals per
 * direction (calls, bytes, time in the calls), since the time a copy took on the GPU is not in the trace.
 */
import { BadInputError } from '../../errors.js';
import { optNumber } from '../../input/numbers.js';
import type { JsonObject } from '../../input/json-stream.js';
import { classifyApi, type DirectionName, type TraceModel } from '../model.js';
import { foreignCall, type ForeignCall } from './chrome-trace-kind.js';

interface Pending {
  call: ForeignCall;
  startUs: number;
  endUs: number;
  thread: number;
}

/** Calls held before the file is known to be another tool's; beyond this many, later ones are counted, not kept. */
const MAX_CALLS = 2_000_000;

export class ChromeApiCalls {
  private readonly calls: Pending[] = [];
  /** Open B events per thread and name. */
  private readonly open = new Map<string, Array<{ call: ForeignCall; startUs: number }>>();
  private dropped = 0;

  constructor(private readonly file: string) {}

  /** Offers an event the Kineto reader does not read; kept when it is a CUDA or HIP call. */
  offer(v: JsonObject, where: string): void {
    const call = foreignCall(v);
    if (!call) return;
    if (this.calls.length >= MAX_CALLS) {
      this.dropped++;
      return;
    }
    const ts = optNumber(v.ts, `${where} ts`, this.file);
    if (ts === undefined) throw new BadInputError(`${where} ts is missing`, this.file);
    const thread = Number(v.tid ?? 0) || 0;
    const key = `${String(v.pid)}:${thread}:${call.name}`;
    if (v.ph === 'X') {
      const dur = optNumber(v.dur, `${where} dur`, this.file) ?? 0;
      this.calls.push({ call, startUs: ts, endUs: ts + dur, thread });
    } else if (v.ph === 'B') {
      let stack = this.open.get(key);
      if (!stack) this.open.set(key, (stack = []));
      stack.push({ call, startUs: ts });
    } else if (v.ph === 'E') {
      const begun = this.open.get(key)?.pop();
      // an E names its call like its B; the byte count may be on either
      if (begun)
        this.calls.push({ call: begun.call.copy || !call.copy ? begun.call : call, startUs: begun.startUs, endUs: Math.max(ts, begun.startUs), thread });
    } else if (v.ph === 'i' || v.ph === 'I') this.calls.push({ call, startUs: ts, endUs: ts, thread });
  }

  /** Puts the calls into the model: runtime rows, and the copies as totals per direction. Returns how many calls. */
  commit(model: TraceModel): number {
    const copies = new Map<DirectionName, { calls: number; totalNs: number; bytes: number; unsized: number }>();
    for (const c of this.calls) {
      const start = model.time(Math.round(c.startUs * 1000));
      const end = start + Math.round((c.endUs - c.startUs) * 1000);
      model.runtime.push({ start, end, api: classifyApi(c.call.name), thread: c.thread, correlation: Number.NaN });
      if (!c.call.copy) continue;
      let g = copies.get(c.call.copy.direction);
      if (!g) copies.set(c.call.copy.direction, (g = { calls: 0, totalNs: 0, bytes: 0, unsized: 0 }));
      g.calls++;
      g.totalNs += end - start;
      if (Number.isNaN(c.call.copy.bytes)) g.unsized++;
      else g.bytes += c.call.copy.bytes;
    }
    for (const [direction, g] of copies)
      model.aggregateCopies.push({ direction, calls: g.calls, totalNs: g.totalNs, bytes: g.unsized === g.calls ? undefined : g.bytes });
    model.traced('runtime');
    model.formats.add('chrome-trace');
    const sized = [...copies.values()].reduce((t, g) => t + g.calls - g.unsized, 0);
    model.note(
      `${this.file}: a Chrome trace of another tool (an eBPF monitor or an interposer of the CUDA / HIP libraries), read as its ${this.calls.length} CUDA / HIP calls${copies.size ? `, ${sized} of its copy calls with byte counts` : ''}; it records no GPU activity, so the copies are totals of their calls, not timed on the GPU${this.dropped ? ` (${this.dropped} calls beyond the first ${MAX_CALLS} left out)` : ''}`,
    );
    return this.calls.length;
  }
}
