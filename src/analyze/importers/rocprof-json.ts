/**
 * Legacy rocprof (v1) `results.json`, the Chrome trace its --hip-trace / --hsa-trace runs write (rocprofiler's
 * tblextr.py): no `cat` on events; lanes are processes named by `process_name` metadata ("CPU HIP API", "CPU HSA API",
 * "COPY", "GPU0", "GPU Barriers0", "Markers and Ranges"); `ts` and `dur` are microseconds written as strings; every
 * event's args repeat its table row, with BeginNs / EndNs in nanoseconds, which are used where present. Copies carry
 * no byte count and no correlation to the call that issued them: each is paired with its call by time (hip-args.ts),
 * whose argument text gives its size and host address; the calls' arguments give allocations too. GPU lanes hold
 * kernels and HIP's commands that are none ("Unknown command type": hip-ops.ts), left out.
 */
import { BadInputError } from '../../errors.js';
import { walkJsonChunked } from '../../input/json-chunks.js';
import { isJsonObject as isObj, type Json, type PathKey } from '../../input/json-stream.js';
import { optNumber, reqTimestamp } from '../../input/numbers.js';
import { Api, classifyApi, Direction, kindsByDirection, type TraceModel } from '../model.js';
import { HipAllocations, hipCallArgs, type HipCallArgs, pairCopiesWithCalls, type TimedOp } from './hip-args.js';
import { hipOpKind } from './hip-ops.js';
import { parseCopyName } from './kineto.js';
import { noteOtherOps } from './rocprof-db.js';

/** A kernel on a GPU lane. */
type GpuOp = { start: number; end: number; stream: number; device: number; name: string };

/** A HIP call of the trace and what its argument text says. */
type HipCall = TimedOp & { args: HipCallArgs; text: string; name: string; api: number };

type Lane = { kind: 'copy' | 'hip' | 'hsa' | 'gpu' | 'other'; device: number };

/** What a lane label names. */
function laneOf(label: string): Lane {
  if (label === 'COPY') return { kind: 'copy', device: 0 };
  if (label === 'CPU HIP API') return { kind: 'hip', device: 0 };
  if (label === 'CPU HSA API') return { kind: 'hsa', device: 0 };
  const gpu = /^GPU(\d+)$/.exec(label);
  if (gpu) return { kind: 'gpu', device: Number(gpu[1]) };
  return { kind: 'other', device: 0 }; // GPU Barriers, Markers and Ranges
}

/**
 * Reads a legacy rocprof results.json into the model.
 * @throws BadInputError for malformed JSON or events whose times are not numbers.
 */
export async function importRocprofV1Json(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  const lanes = new Map<number, Lane>();
  let unlabelled = 0;
  let events = 0;
  /** Whether times come from BeginNs / EndNs (nanoseconds, one clock) or ts / dur (microseconds since the run's start). */
  let clock: 'ns' | 'us' | undefined;
  let otherClock = 0;
  const calls: HipCall[] = [];
  const copyOps: TimedOp[] = [];
  const other = new Map<string, number>();
  const kern: GpuOp[] = [];
  const ops: GpuOp[] = [];
  const select = (p: readonly PathKey[]): boolean => p.length === 2 && p[0] === 'traceEvents' && typeof p[1] === 'number';
  const onValue = (p: readonly PathKey[], v: Json): void => {
    if (!isObj(v)) return;
    const where = `traceEvents[${String(p[1])}]`;
    const args = isObj(v.args ?? null) ? (v.args as Record<string, Json>) : {};
    const pid = optNumber(v.pid, `${where}.pid`, file);
    if (v.ph === 'M') {
      if (v.name === 'process_name' && pid !== undefined && typeof args.name === 'string') lanes.set(pid, laneOf(args.name));
      return;
    }
    if (v.ph !== 'X') return;
    events++;
    const lane = pid === undefined ? undefined : lanes.get(pid);
    if (!lane) {
      unlabelled++;
      return;
    }
    if (lane.kind === 'other') return;
    const hasNs = args.BeginNs !== undefined && args.EndNs !== undefined;
    clock ??= hasNs ? 'ns' : 'us';
    let start: number;
    let end: number;
    if (clock === 'ns') {
      if (!hasNs) {
        otherClock++;
        return;
      }
      start = model.time(reqTimestamp(args.BeginNs, `${where}.args.BeginNs`, file));
      end = model.time(reqTimestamp(args.EndNs, `${where}.args.EndNs`, file));
    } else {
      const ts = optNumber(v.ts, `${where}.ts`, file);
      const dur = optNumber(v.dur, `${where}.dur`, file);
      if (ts === undefined || dur === undefined) throw new BadInputError(`${where} has no ts / dur`, file);
      start = model.time(ts * 1000);
      end = start + dur * 1000;
    }
    if (end < start) throw new BadInputError(`${where} ends before it starts`, file);
    const name = typeof v.name === 'string' ? v.name : '';
    const stream = optNumber(args['stream-id'] ?? args['queue-id'], `${where}.args.stream-id`, file) ?? 0;
    const thread = optNumber(args.tid ?? v.tid, `${where}.tid`, file) ?? 0;
    if (lane.kind === 'hip' || lane.kind === 'hsa') {
      const api = classifyApi(name);
      model.runtime.push({ start, end, api, thread, correlation: Number.NaN });
      if (lane.kind === 'hip' && typeof args.args === 'string') {
        const a = hipCallArgs(args.args);
        calls.push({ start, end, thread, dir: a.dir, args: a, text: args.args, name, api });
      }
      return;
    }
    const kind = hipOpKind(name);
    if (kind === 'other') {
      other.set(name, (other.get(name) ?? 0) + 1);
      return;
    }
    if (lane.kind === 'gpu') {
      if (kind === 'barrier') return;
      // tblextr writes a GPU lane from KERN (args.KernelName) and, with --hip-trace, from OPS too: the same dispatches
      (args.KernelName !== undefined ? kern : ops).push({ start, end, stream, device: lane.device, name });
      return;
    }
    const device = optNumber(args['dev-id'], `${where}.args.dev-id`, file) ?? 0;
    if (kind === 'fill') {
      model.memsets.push({ start, end, bytes: Number.NaN, stream, device });
      return;
    }
    if (kind === 'barrier' || /barrier|marker/i.test(name)) return;
    const { dir } = parseCopyName(name);
    copyOps.push({ start, end, dir, thread });
    if (dir === Direction.HtoD || dir === Direction.DtoH) model.hostKindUnknown++;
    model.copies.push({
      start,
      end,
      dir,
      ...kindsByDirection(dir),
      bytes: Number.NaN,
      stream,
      device,
      correlation: Number.NaN,
      hostAddr: Number.NaN,
      op: -1,
    });
  };
  await walkJsonChunked(file, select, onValue, { progress });
  if (lanes.size === 0) throw new BadInputError('no process_name metadata naming rocprof lanes: not a rocprof results.json', file);
  if (events === 0) throw new BadInputError(`traceEvents holds no events, only the names of ${lanes.size} lanes`, file);
  if (unlabelled > 0) model.note(`${unlabelled} events on lanes with no process_name label were left out`);
  if (otherClock > 0) model.note(`${otherClock} events without BeginNs / EndNs (on another clock than the rest) were left out`);
  // --hip-trace records HIP calls with the kernels and copies they start: a labelled HIP lane means all three were traced
  if ([...lanes.values()].some((l) => l.kind === 'hip')) model.traced('runtime', 'kernels', 'copies');
  for (const k of kern.length > 0 ? kern : ops) {
    model.kernels.push(k);
    model.addKernelName(k.name, k.end - k.start);
  }
  if (kern.length > 0 && ops.length > 0)
    model.note(`${file}: ${ops.length} kernel events from HIP's operations (OPS) left out: the KERN events record the same dispatches`);
  noteOtherOps(model, file, 'the GPU and COPY lanes', other);
  sizeCopies(file, model, calls, copyOps);
  model.formats.add('rocprof-json');
}

/** Sizes and host addresses of the copies from the calls that made them; allocations from the calls' arguments. */
function sizeCopies(file: string, model: TraceModel, calls: HipCall[], copyOps: TimedOp[]): void {
  const allocations = new HipAllocations(model);
  for (const c of [...calls].sort((a, b) => a.end - b.end)) allocations.call(c.api, c.name, c.text, c.end);
  if (allocations.recorded > 0) model.traced('allocations');
  // a copy of no bytes puts nothing on the GPU
  const copyCalls = calls.filter((c) => (c.api === Api.memcpySync || c.api === Api.memcpyAsync) && c.args.bytes !== 0);
  const pair = pairCopiesWithCalls(copyOps, copyCalls);
  let sized = 0;
  // copies were pushed in the order copyOps holds them, after those of the model's earlier files
  const first = model.copies.length - copyOps.length;
  pair.forEach((j, k) => {
    const call = j >= 0 ? copyCalls[j] : undefined;
    if (!call || Number.isNaN(call.args.bytes)) return;
    const i = first + k;
    const dir = model.copies.get(i, 'dir');
    model.copies.set(i, 'bytes', call.args.bytes);
    const host = dir === Direction.HtoD ? call.args.src : dir === Direction.DtoH ? call.args.dst : Number.NaN;
    model.copies.set(i, 'hostAddr', host);
    sized++;
  });
  if (sized > 0)
    model.note(
      `${file}: ${sized} of ${copyOps.length} copies sized by the sizeBytes argument of the HIP call each was paired with in issue order (results.json links copies to no call)`,
    );
  if (sized < copyOps.length)
    model.note(
      `${copyOps.length - sized} rocprof results.json copies carry no byte count (no HIP call with a sizeBytes argument made them): size-based findings skip them`,
    );
}
