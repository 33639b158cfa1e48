/**
 * PyTorch profiler (Kineto) Chrome traces, .json or .json.gz, read as a stream: the CUDA flavour names copies
 * "Memcpy HtoD (Pageable -> Device)", the ROCm flavour "Memcpy HtoD (Host -> Device)" or "CopyHostToDevice", which
 * does not say whether the host side was pinned. Timestamps are microseconds with fractions. A Chrome trace that
 * another tool wrote is told apart (chrome-trace-kind.ts): read as its CUDA / HIP calls, or refused naming it.
 */
import { BadInputError } from '../../errors.js';
import { walkJsonChunked } from '../../input/json-chunks.js';
import { isJsonObject as isObj, walkJson, type Json, type JsonObject as Obj, type PathKey } from '../../input/json-stream.js';
import { AllocLevel, Api, Direction, MemKind, SyncKind, classifyApi, type TraceModel } from '../model.js';
import { describe, optNumber } from '../../input/numbers.js';
import { directionCode, directionOf, memKindOf } from './fields.js';
import { ChromeApiCalls } from './chrome-api-calls.js';
import { CHROME_TRACE_KEYS, ChromeTraceSignature } from './chrome-trace-kind.js';

/**
 * Event categories by schema: current Kineto writes gpu_memcpy / gpu_memset / kernel / cuda_runtime / cpu_op /
 * cuda_sync; the 2021 schema (PyTorch 1.8-1.9, still in Kineto's own samples) wrote Memcpy / Memset / Kernel /
 * Runtime / Operator.
 */
const CATEGORY: Readonly<Record<string, string>> = {
  gpu_memcpy: 'gpu_memcpy',
  memcpy: 'gpu_memcpy',
  gpu_memset: 'gpu_memset',
  memset: 'gpu_memset',
  kernel: 'kernel',
  cuda_runtime: 'runtime',
  cuda_driver: 'runtime',
  hip_runtime: 'runtime',
  runtime: 'runtime',
  cuda_sync: 'cuda_sync',
  cpu_op: 'cpu_op',
  operator: 'cpu_op',
};

/** Kineto's cuda_sync kinds (CUPTI synchronization activity) as SyncKind values. */
const SYNC_KIND: Readonly<Record<string, number>> = {
  'Stream Sync': SyncKind.stream,
  'Context Sync': SyncKind.device,
  'Event Sync': SyncKind.event,
  'Stream Wait Event': SyncKind.streamWait,
};

/** Framework ops that move memory or wait on the device; counted, and named in evidence. */
const CPU_OPS = /^aten::(item|_local_scalar_dense|to|_to_copy|copy_|pin_memory|_pin_memory|nonzero|cpu|cuda|tolist|is_nonzero|equal|masked_select)$/;

/** Parses a copy's name into direction and source / destination kinds. */
export function parseCopyName(name: string): { dir: number; src: number; dst: number } {
  const arrow = /(\w+)\s*->\s*(\w+)/.exec(name);
  const code = /\b(HtoD|DtoH|DtoD|PtoP|HtoH|HtoA|AtoH|AtoD|DtoA|AtoA)\b/.exec(name);
  const words = /Copy(Host|Device)To(Host|Device)/i.exec(name);
  let dir: number = Direction.unknown;
  let src: number = MemKind.unknown;
  let dst: number = MemKind.unknown;
  if (arrow) {
    src = memKindOf(arrow[1]!);
    dst = memKindOf(arrow[2]!);
    dir = directionOf(arrow[1]!, arrow[2]!);
  } else if (words) {
    src = memKindOf(words[1]!);
    dst = memKindOf(words[2]!);
    dir = directionOf(words[1]!, words[2]!);
  }
  if (code) dir = directionCode(code[1]!);
  return { dir, src, dst };
}

/**
 * How JSON is read: 'chunked' cuts the traceEvents array into chunks of whole events for JSON.parse (fast, the
 * default); 'careful' assembles every value token by token (walkJson). Both give the same values, within the same limits.
 */
export type JsonReader = 'chunked' | 'careful';

/**
 * Reads a Kineto trace into the model.
 * @throws BadInputError for malformed, truncated or non-Kineto input.
 */
export async function importKineto(file: string, model: TraceModel, progress?: (bytes: number) => void, reader: JsonReader = 'chunked'): Promise<void> {
  let events = 0;
  let sawEvents = false;
  let bad = 0;
  const opByExternal = new Map<number, number>();
  // which tool wrote the file, and the CUDA / HIP calls of another tool's trace, held until that is known
  const signature = new ChromeTraceSignature();
  const foreign = new ChromeApiCalls(file);
  const gpu = { events: 0, launches: 0, calls: 0 };
  const us = (v: Json, what: string): number => {
    const n = optNumber(v, what, file);
    if (n === undefined) throw new BadInputError(`${what} is missing`, file);
    return n;
  };
  const select = (p: readonly PathKey[]): boolean =>
    (p.length === 1 && typeof p[0] === 'string' && CHROME_TRACE_KEYS.has(p[0])) ||
    (p.length === 1 && p[0] === 'distributedInfo') ||
    (p.length === 2 && typeof p[1] === 'number' && (p[0] === 'traceEvents' || p[0] === 'deviceProperties' || p[0] === 'computeProperties')) ||
    (p.length === 1 && typeof p[0] === 'number');
  const onValue = (p: readonly PathKey[], v: Json): void => {
    if (typeof p[0] === 'string' && p[0] !== 'traceEvents') signature.key(p[0]);
    if (p.length === 1 && typeof p[0] === 'string' && p[0] !== 'distributedInfo') return;
    if (p[0] === 'distributedInfo') {
      if (isObj(v)) model.rank = optNumber(v.rank, 'distributedInfo.rank', file);
      return;
    }
    if (p[0] === 'deviceProperties' || p[0] === 'computeProperties') {
      // computeProperties is the 2021 schema's name for the same list
      if (isObj(v) && typeof v.name === 'string') {
        const id = optNumber(v.id, `${p[0]} id`, file) ?? model.devices.size;
        model.devices.set(id, v.name);
        const mem = optNumber(v.totalGlobalMem, `${p[0]} totalGlobalMem`, file);
        if (mem !== undefined && mem > 0) model.deviceMemory.set(id, mem);
      }
      return;
    }
    sawEvents = true;
    if (!isObj(v)) {
      if (++bad > 1000)
        throw new BadInputError(`traceEvents[${String(p[p.length - 1])}] is ${describe(v)}, not an event object (and so were 1000 before it)`, file);
      return;
    }
    events++;
    signature.event(v);
    const cat = typeof v.cat === 'string' ? v.cat.toLowerCase() : '';

    const name = typeof v.name === 'string' ? v.name : '';
    const args = isObj(v.args ?? null) ? (v.args as Obj) : {};
    const where = `traceEvents[${String(p[p.length - 1])}]`;
    if (v.ph === 'i' && name === '[memory]') {
      if (optNumber(args['Device Type'], `${where} Device Type`, file) === 0) return;
      const bytes = typeof args.Bytes === 'number' && Number.isFinite(args.Bytes) ? args.Bytes : Number.NaN;
      if (Number.isNaN(bytes)) throw new BadInputError(`${where} [memory] Bytes is ${describe(args.Bytes)}`, file);
      model.allocs.push({
        time: model.time(us(v.ts ?? null, `${where} ts`) * 1000),
        bytes,
        device: optNumber(args['Device Id'], `${where} Device Id`, file) ?? 0,
        address: optNumber(args.Addr, `${where} Addr`, file) ?? Number.NaN,
        allocated: optNumber(args['Total Allocated'], `${where} Total Allocated`, file) ?? Number.NaN,
        reserved: optNumber(args['Total Reserved'], `${where} Total Reserved`, file) ?? Number.NaN,
        host: 0,
        agent: -1,
        level: AllocLevel.framework,
      });
      return;
    }
    const kind = v.ph === 'X' ? CATEGORY[cat] : undefined;
    if (kind === undefined) {
      foreign.offer(v, where);
      return;
    }
    const external = args['External id'] ?? args['external id'];
    if (kind === 'cpu_op') {
      if (CPU_OPS.test(name)) {
        model.cpuOps.set(name, (model.cpuOps.get(name) ?? 0) + 1);
        const ext = optNumber(external, `${where} External id`, file);
        if (ext !== undefined && opByExternal.size < 1 << 22) opByExternal.set(ext, model.opIndex(name));
      }
      return;
    }
    const startUs = us(v.ts ?? null, `${where} ts`);
    const durUs = us(v.dur ?? null, `${where} dur`);
    const start = model.time(startUs * 1000);
    // durations in µs with three decimals are whole nanoseconds: 4.07 µs is 4070 ns, not 4070.0000000000005
    const end = start + Math.round(durUs * 1000);
    const device = optNumber(args.device, `${where} device`, file) ?? 0;
    const correlation = optNumber(args.correlation, `${where} correlation`, file) ?? Number.NaN;
    if (kind === 'cuda_sync') {
      // stream -1: not one stream (a context or event synchronisation).
      const stream = args.stream === -1 ? -1 : (optNumber(args.stream, `${where} stream`, file) ?? -1);
      const what = typeof args.cuda_sync_kind === 'string' ? args.cuda_sync_kind : name;
      model.syncs.push({ start, end, stream, kind: SYNC_KIND[what] ?? SyncKind.unknown, correlation });
      return;
    }
    if (kind === 'runtime') {
      const api = classifyApi(name);
      gpu.calls++;
      if (api === Api.launch) gpu.launches++;
      model.runtime.push({ start, end, api, thread: Number(v.tid ?? 0) || 0, correlation });
      return;
    }
    gpu.events++;
    const stream = optNumber(args.stream, `${where} stream`, file) ?? (Number(v.tid ?? 0) || 0);
    switch (kind) {
      case 'gpu_memcpy': {
        const { dir, src, dst } = parseCopyName(name);
        const ext = optNumber(external, `${where} External id`, file);
        const hostSide = dir === Direction.HtoD ? src : dir === Direction.DtoH ? dst : MemKind.device;
        if (hostSide === MemKind.unknown) model.hostKindUnknown++;
        model.copies.push({
          start,
          end,
          dir,
          src,
          dst,
          stream,
          device,
          correlation,
          bytes: optNumber(args.bytes, `${where} bytes`, file) ?? Number.NaN,
          hostAddr: Number.NaN,
          op: ext !== undefined ? (opByExternal.get(ext) ?? -1) : -1,
        });
        return;
      }
      case 'gpu_memset':
        model.memsets.push({ start, end, stream, device, bytes: optNumber(args.bytes, `${where} bytes`, file) ?? Number.NaN });
        return;
      case 'kernel':
        model.kernels.push({ start, end, stream, device });
        model.addKernelName(name, end - start);
        return;
    }
  };
  await (reader === 'careful' ? walkJson : walkJsonChunked)(file, select, onValue, { progress });
  if (!sawEvents) throw new BadInputError('no traceEvents array: not a PyTorch profiler / Chrome trace', file);
  if (events === 0) throw new BadInputError('traceEvents holds no events', file);
  if (!signature.isKineto()) {
    // another tool's Chrome trace: its CUDA / HIP calls where it holds some, else refused naming what it is
    if (signature.gpuApiCalls() === 0) throw new BadInputError(signature.describe(), file);
    foreign.commit(model);
    return;
  }
  if (gpu.events === 0 && gpu.calls > 0)
    model.note(
      `${file}: the trace holds no GPU activity (no kernel, copy or memset; ${gpu.calls} CUDA / HIP runtime calls${gpu.launches ? `, ${gpu.launches} of them kernel launches` : ''}): was the profiler run without ProfilerActivity.CUDA, or did the GPU work fall outside the profiled steps?`,
    );
  // CUPTI and roctracer activity record kernels, copies and memsets together: a trace with GPU activity traced copies
  if (model.kernels.length > 0 || model.copies.length > 0 || model.memsets.length > 0) model.traced('kernels', 'copies');
  model.formats.add('kineto');
}
