/**
 * Which tool wrote a Chrome trace (the JSON trace-event format many tools write): the PyTorch profiler (Kineto),
 * or another tool, told by what it holds. Kineto traces carry their own top-level keys (deviceProperties,
 * distributedInfo, traceName, the CUPTI / roctracer versions) or event categories (cpu_op, kernel, gpu_memcpy,
 * cuda_runtime, ac2g ...). A trace of another tool is read where it records memory work (CUDA or HIP calls with
 * byte counts, as eBPF monitors and interposers write them), and otherwise refused naming what it is: it is never
 * taken for a Kineto trace with nothing in it.
 */
import type { DirectionName } from '../model.js';
import { isJsonObject, type Json, type JsonObject } from '../../input/json-stream.js';

/** Top-level keys only Kineto writes (schemaVersion alone is not one: other tools write it too). */
const KINETO_KEYS = new Set([
  'deviceProperties',
  'computeProperties',
  'distributedInfo',
  'traceName',
  'baseTimeNanoseconds',
  'cupti_version',
  'cuda_runtime_version',
  'cuda_driver_version',
  'roctracer_version',
  'hip_runtime_version',
  'hip_driver_version',
  'record_shapes',
  'profile_memory',
  'with_stack',
  'with_flops',
  'with_modules',
]);
/**
 * Top-level keys whose values the reader takes whole, for telling tools apart (the lists, deviceProperties and
 * computeProperties, are read element by element and seen as they come).
 */
export const CHROME_TRACE_KEYS = new Set(
  [...KINETO_KEYS, 'schemaVersion', 'displayTimeUnit', 'beginningOfTime', 'otherData'].filter((k) => k !== 'deviceProperties' && k !== 'computeProperties'),
);

/** Event categories of Kineto traces, current and 2021 (lower-cased). */
const KINETO_CATS = new Set([
  'cpu_op',
  'operator',
  'user_annotation',
  'gpu_user_annotation',
  'python_function',
  'ac2g',
  'fwdbwd',
  'cpu_instant_event',
  'overhead',
  'trace',
  'cuda_profiler_range',
  'async_cpu_to_gpu',
  'kernel',
  'gpu_memcpy',
  'gpu_memset',
  'memcpy',
  'memset',
  'cuda_runtime',
  'cuda_driver',
  'hip_runtime',
  'runtime',
  'cuda_sync',
  'mtia_runtime',
  'mtia_ccp_events',
]);
/** Event names Kineto writes whatever was profiled. */
const KINETO_NAMES = /^(PyTorch Profiler \(\d+\)|Record Window End|Iteration Start: PyTorch Profiler|ProfilerStep#\d+|\[memory\])$/;

/** A CUDA or HIP runtime or driver call, by name (cuMemcpyHtoD_v2, cudaMemcpyAsync, hipMalloc). */
export const GPU_API_NAME = /^(cu|cuda|hip)[A-Z][A-Za-z0-9]*(_v\d+)?(_ptsz|_ptds)?$/;

/** What the events of a Chrome trace show of the tool that wrote it. */
export class ChromeTraceSignature {
  private kineto = false;
  private events = 0;
  private apiCalls = 0;
  private readonly keys = new Set<string>();
  private readonly cats = new Map<string, number>();
  private readonly names = new Map<string, number>();
  private readonly processes = new Set<string>();

  /** A top-level key of the trace object. */
  key(name: string): void {
    this.keys.add(name);
    if (KINETO_KEYS.has(name)) this.kineto = true;
  }

  /** One event, as the reader met it. */
  event(v: JsonObject): void {
    this.events++;
    const cat = typeof v.cat === 'string' ? v.cat : '';
    const name = typeof v.name === 'string' ? v.name : '';
    if (KINETO_CATS.has(cat.toLowerCase()) || KINETO_NAMES.test(name)) this.kineto = true;
    if (cat && (this.cats.size < 64 || this.cats.has(cat))) this.cats.set(cat, (this.cats.get(cat) ?? 0) + 1);
    if (name && (this.names.size < 4096 || this.names.has(name))) this.names.set(name, (this.names.get(name) ?? 0) + 1);
    if (GPU_API_NAME.test(name) && v.ph !== 'E') this.apiCalls++;
    const args = isJsonObject(v.args ?? null) ? (v.args as JsonObject) : undefined;
    if (v.ph === 'M' && name === 'process_name' && typeof args?.name === 'string' && this.processes.size < 64) this.processes.add(args.name);
    if (typeof v.pid === 'string' && this.processes.size < 64) this.processes.add(v.pid);
  }

  /** True for a trace the PyTorch profiler wrote. */
  isKineto(): boolean {
    return this.kineto;
  }

  /** CUDA or HIP calls the trace holds, under whatever category. */
  gpuApiCalls(): number {
    return this.apiCalls;
  }

  /** Events named as copies by their direction ("[MEMCPY] HtoD", "Memcpy DtoH"), which are not CUDA calls. */
  private copyRecords(): number {
    let n = 0;
    for (const [name, k] of this.names) if (/memcpy|\bcopy\b/i.test(name) && /\b(HtoD|DtoH|DtoD|H2D|D2H|D2D)\b/.test(name) && !GPU_API_NAME.test(name)) n += k;
    return n;
  }

  /** What the trace is, when it is not Kineto's and holds no GPU calls: for the refusal. */
  describe(): string {
    const has = (re: RegExp): boolean => [...this.names.keys()].some((n) => re.test(n));
    const cat = (re: RegExp): boolean => [...this.cats.keys()].some((c) => re.test(c));
    const proc = (re: RegExp): boolean => [...this.processes].some((p) => re.test(p));
    const tops = (m: Map<string, number>, n: number): string =>
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([k, c]) => `${k.length > 40 ? `${k.slice(0, 40)}…` : k} (${c})`)
        .join(', ');
    const what = `${this.events} events${this.cats.size ? ` in categories ${tops(this.cats, 4)}` : ''}${this.names.size ? `; most frequent names ${tops(this.names, 4)}` : ''}`;
    let tool: string;
    if (this.keys.has('beginningOfTime') || has(/^(Total )?(ExecuteCompiler|Frontend|Backend|ParseClass|InstantiateFunction|OptModule)$/))
      tool = 'a Clang -ftime-trace compilation profile (compiler phases, no GPU activity)';
    else if (proc(/^CPU functions$|^CUDA functions$/))
      tool =
        'a torch.autograd.profiler trace from before Kineto (PyTorch 1.7 and earlier, or use_kineto=False): operators and their CUDA time, no kernels or copies; record with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) and export_chrome_trace';
    else if (cat(/^(GROUP_API|COLL(_API)?|P2P(_API)?|KERNEL_LAUNCH|PROXY_?(OP|STEP|CTRL)|NET_PLUGIN)$/i))
      tool = 'an NCCL profiler-plugin trace (collectives, proxy and network steps; no copies, kernels or API calls with byte counts)';
    else if (proc(/^\/(device|host):/i)) tool = 'a TensorFlow or JAX profiler trace (the trace viewer JSON of TensorBoard)';
    else if (cat(/devtools\.timeline|^blink|^toplevel|^disabled-by-default-/)) tool = 'a Chromium browser performance trace';
    else if (cat(/^node(\.|$)|^v8(\.|$)/)) tool = 'a Node.js trace-events log';
    else if (this.copyRecords() > 0)
      tool = `a Chrome trace of GPU activity from a tool other than the PyTorch profiler, with ${this.copyRecords()} copy records named by direction but no byte counts (what gpumem's copy rules rest on)`;
    else tool = 'a Chrome trace from a tool other than the PyTorch profiler';
    return `${tool}: ${what}, none of them PyTorch profiler (Kineto) events or CUDA / HIP calls. gpumem reads the PyTorch profiler's trace (torch.profiler export_chrome_trace), an nsys SQLite export, rocprof output, or Chrome traces of CUDA calls with byte counts`;
  }
}

/** Argument names tools give a call's byte count. */
const SIZE_KEYS = /^(size|bytes|nbytes|num_?bytes|byte_?count|sizeBytes|size_?bytes|count|len|length|ByteCount|bytesize)$/i;

/** Directions as call names spell them (arrays are device memory). */
const NAMED_DIRECTION: Record<string, DirectionName> = {
  HtoD: 'HtoD',
  HtoA: 'HtoD',
  DtoH: 'DtoH',
  AtoH: 'DtoH',
  DtoD: 'DtoD',
  DtoA: 'DtoD',
  AtoD: 'DtoD',
  AtoA: 'DtoD',
  HtoH: 'HtoH',
  Peer: 'PtoP',
};

/** A memcpy call's direction from its name or its kind argument (cudaMemcpyKind: 1 HtoD, 2 DtoH, 3 DtoD). */
function copyDirection(name: string, args: JsonObject): DirectionName | undefined {
  const n = name.replace(/^(cuda|hip|cu)/, '');
  if (!/^Memcpy/i.test(n)) return undefined;
  const fromName = /(HtoD|HtoA|DtoH|AtoH|DtoD|DtoA|AtoD|AtoA|HtoH|Peer)/.exec(n)?.[1];
  if (fromName) return NAMED_DIRECTION[fromName];
  const kind = args.kind ?? args.memcpyKind ?? args.direction;
  if (typeof kind === 'number') return (['HtoH', 'HtoD', 'DtoH', 'DtoD'] as const)[kind] ?? 'unknown';
  if (typeof kind === 'string') {
    const k = kind.replace(/[^A-Za-z]/g, '').toLowerCase();
    for (const [re, d] of [
      [/hosttodevice|htod|h2d/, 'HtoD'],
      [/devicetohost|dtoh|d2h/, 'DtoH'],
      [/devicetodevice|dtod|d2d/, 'DtoD'],
      [/hosttohost|htoh|h2h/, 'HtoH'],
    ] as const)
      if (re.test(k)) return d;
  }
  return 'unknown';
}

/** A CUDA or HIP call of another tool's Chrome trace: its name, and for a copy its direction and bytes. */
export interface ForeignCall {
  name: string;
  copy?: { direction: DirectionName; bytes: number };
}

/** Reads a CUDA or HIP call from another tool's event, or undefined for any other event. */
export function foreignCall(v: JsonObject): ForeignCall | undefined {
  const name = typeof v.name === 'string' ? v.name : '';
  if (!GPU_API_NAME.test(name)) return undefined;
  const args = isJsonObject((v.args ?? null) as Json) ? (v.args as JsonObject) : {};
  const direction = copyDirection(name, args);
  if (direction === undefined) return { name };
  const sizeKey = Object.keys(args).find((k) => SIZE_KEYS.test(k) && typeof args[k] === 'number' && Number.isFinite(args[k]) && (args[k] as number) >= 0);
  return { name, copy: { direction, bytes: sizeKey ? (args[sizeKey] as number) : Number.NaN } };
}
