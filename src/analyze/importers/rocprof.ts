/**
 * ROCm profilers' CSV and JSON. rocprofv2's CSV is read by rocprofv2.ts, recognised here. rocprofv3 (rocprofiler-sdk) writes one CSV per trace kind — memory_copy_trace, kernel_trace,
 * hip_api_trace, memory_allocation_trace, agent_info — sharing one nanosecond clock, and a JSON file holding all of
 * them. Its documented memory copy rows carry no size and no host address; where a version writes them (a Bytes or
 * address column, or bytes / src_address in JSON) they are used. Legacy rocprof and rocprofv3 --stats write
 * aggregate tables (Name, Calls, TotalDurationNs, ...), kept as aggregates; legacy rocprof's per-dispatch kernel trace
 * (results.csv: Index, KernelName, gpu-id, queue-id, ..., BeginNs, EndNs) is read as kernels. Before 2022 legacy
 * rocprof wrote names unquoted, their commas bare (C++ template names): the name column is elastic (csv.ts). Its
 * statistics name HIP's commands too: fills are memsets, barriers and unnamed commands are left out (hip-ops.ts).
 */
import { BadInputError } from '../../errors.js';
import { readCsv, type CsvRow } from '../../input/csv.js';
import { sniffText } from '../../input/files.js';
import { isJsonObject as isObj, walkJson, type Json, type JsonObject as Obj, type PathKey } from '../../input/json-stream.js';
import { AllocLevel, DIRECTIONS, Direction, MemKind, kindsByDirection, classifyApi, type TraceModel } from '../model.js';
import { describe, optNumber, reqNumber, reqTimestamp } from '../../input/numbers.js';
import { directionCode } from './fields.js';
import { hipOpKind } from './hip-ops.js';
import { RocprofV2Table, rocprofV2Elastic, rocprofV2Kind, type V2Kind } from './rocprofv2.js';

type CsvKind = 'copies' | 'kernels' | 'api' | 'allocations' | 'agents' | 'stats' | 'copy-rows' | 'dispatches' | V2Kind;

/** Recognises a rocprof CSV (legacy, rocprofv2 or rocprofv3) by its header; undefined when it is not one. */
export function rocprofCsvKind(columns: readonly string[]): CsvKind | undefined {
  const has = (c: string): boolean => columns.includes(c);
  const v2 = rocprofV2Kind(columns);
  if (v2) return v2;
  if (has('Direction') && has('Start_Timestamp') && (has('Source_Agent_Id') || has('Destination_Agent_Id'))) return 'copies';
  if (has('Kernel_Name') && has('Start_Timestamp') && has('End_Timestamp')) return 'kernels';
  // Legacy rocprof (v1) per-dispatch trace: Index,KernelName,gpu-id,queue-id,...,BeginNs,EndNs (results.csv).
  if (has('KernelName') && has('BeginNs') && has('EndNs')) return 'dispatches';
  if (has('Domain') && has('Function') && has('Start_Timestamp')) return 'api';
  if (has('Operation') && has('Allocation_Size')) return 'allocations';
  if (has('Agent_Type') && (has('Node_Id') || has('Logical_Node_Id'))) return 'agents';
  if (has('Name') && has('Calls') && has('TotalDurationNs')) return 'stats';
  const begin = columns.find((c) => /^(Begin|Start)(Ns|_?Timestamp)?$/i.test(c));
  const end = columns.find((c) => /^End(Ns|_?Timestamp)?$/i.test(c));
  if (begin && end && columns.some((c) => /^(Direction|Name|Kind|Copy_?Kind)$/i.test(c))) return 'copy-rows';
  return undefined;
}

const col = (columns: readonly string[], re: RegExp): string | undefined => columns.find((c) => re.test(c));

/** What a statistics table totals: kernels, copies or API calls. */
export type StatsKind = 'kernels' | 'copies' | 'api';

/**
 * What a statistics table totals, by the names rocprof gives its files (results.stats.csv for kernels,
 * results.hip_stats.csv, results.copy_stats.csv; rocprofv3's kernel_stats.csv, hip_api_stats.csv,
 * memory_copy_stats.csv), or undefined when the name does not say.
 */
export function statsKindOf(file: string): StatsKind | undefined {
  const name = file.replace(/^.*[\\/]/, '').toLowerCase();
  if (/copy_stats\.csv$/.test(name)) return 'copies';
  if (/(hip|hsa|marker|api|allocation|scratch)[a-z_]*_stats\.csv$/.test(name)) return 'api';
  if (/kernel_stats\.csv$/.test(name) || /(^|[^_])\.stats\.csv$/.test(name)) return 'kernels';
  return undefined;
}

/**
 * What a rocprof CSV file totals or traces, from its header and name: 'stats' tables with what they total, the
 * other tables with the activity they hold.
 */
export function rocprofCsvRole(file: string): { stats: StatsKind | undefined; activity: StatsKind | undefined; kind: CsvKind | undefined } {
  const header = (
    sniffText(file, 4096)
      .replace(/^\uFEFF/, '')
      .split(/\r?\n/, 1)[0] ?? ''
  )
    .split(',')
    .map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
  const kind = rocprofCsvKind(header);
  if (kind === 'stats') return { stats: statsKindOf(file), activity: undefined, kind };
  const activity: Partial<Record<CsvKind, StatsKind>> = {
    copies: 'copies',
    'copy-rows': 'copies',
    kernels: 'kernels',
    dispatches: 'kernels',
    api: 'api',
    'v2-api': 'api',
    'v2-async-copies': 'copies',
    'v2-dispatches': 'kernels',
    'v2-ops': 'kernels',
  };
  return { stats: undefined, activity: kind ? activity[kind] : undefined, kind };
}

/** What one row of a statistics table whose file name does not say is: a copy, an API call, or a kernel. */
function statsRowKind(name: string): StatsKind {
  if (directionCode(name.replace(/^Copy/i, '')) !== Direction.unknown) return 'copies';
  return /^(hip|hsa_|__hip|roctx|rocblas|hipblas|MEMORY_|SCRATCH_|MARKER_)/i.test(name) ? 'api' : 'kernels';
}

/**
 * Files one row of a statistics table as what it totals: a GPU operation's row (in kernel or copy statistics) by
 * HIP's command name, fills as memsets, barriers and unnamed commands left out (counted in `leftOut`).
 */
function addStatsRow(model: TraceModel, what: StatsKind, name: string, calls: number, totalNs: number, leftOut: Map<string, number>): void {
  if (what === 'api') {
    model.aggregateApis.push({ name, calls, totalNs });
    return;
  }
  const op = hipOpKind(name);
  if (op === 'barrier' || op === 'other') leftOut.set(name, (leftOut.get(name) ?? 0) + calls);
  else if (op === 'fill') model.aggregateMemsets.push({ name, calls, totalNs });
  else if (what === 'copies' || op === 'copy')
    model.aggregateCopies.push({ direction: DIRECTIONS[directionCode(name.replace(/^Copy/i, '').replace(/2D$/, ''))]!, calls, totalNs, bytes: undefined });
  else model.aggregateKernels.push({ name: name.replace(/ \[clone \.kd\]$/, ''), calls, totalNs });
}

/** The column of a table whose cells a row may split (names with bare commas) or leave out. */
function elasticColumn(kind: CsvKind | undefined, columns: readonly string[]): string | undefined {
  if (kind === 'stats') return 'Name';
  if (kind === 'dispatches') return 'KernelName';
  if (kind?.startsWith('v2-')) return rocprofV2Elastic(kind as V2Kind, columns);
  return undefined;
}

/**
 * Reads one rocprof / rocprofv3 CSV file into the model.
 * @throws BadInputError for a CSV that is not a known rocprof table, or a malformed row.
 */
export async function importRocprofCsv(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  let kind: CsvKind | undefined;
  let bytesCol: string | undefined;
  let srcAddrCol: string | undefined;
  let dstAddrCol: string | undefined;
  let beginCol = 'Start_Timestamp';
  let endCol = 'End_Timestamp';
  let v2: RocprofV2Table | undefined;
  const leftOut = new Map<string, number>();
  const statsKind = statsKindOf(file);
  const onHeader = (cols: string[]): void => {
    kind = rocprofCsvKind(cols);
    if (!kind) throw new BadInputError(`not a rocprof / rocprofv3 CSV table (header: ${cols.slice(0, 8).join(',').slice(0, 120)})`, file);
    if (kind.startsWith('v2-')) v2 = new RocprofV2Table(kind as V2Kind, file, model);
    bytesCol = col(cols, /^(Bytes|Size|Copy_?Bytes|Memory_Copy_Size|Data_?Size|SizeBytes)$/i);
    srcAddrCol = col(cols, /^(Src|Source)_?(Address|Addr|Ptr)$/i);
    dstAddrCol = col(cols, /^(Dst|Destination)_?(Address|Addr|Ptr)$/i);
    if (kind === 'copy-rows') {
      beginCol = col(cols, /^(Begin|Start)(Ns|_?Timestamp)?$/i)!;
      endCol = col(cols, /^End(Ns|_?Timestamp)?$/i)!;
    }
  };
  const onRow = (r: CsvRow, n: number): void => {
    if (v2) return v2.row(r, n);
    const where = `row ${n}`;
    const t = (c: string): number => model.time(reqTimestamp(r[c], `${where} ${c}`, file));
    switch (kind) {
      case 'copies':
      case 'copy-rows': {
        const dirText = r.Direction ?? r.Name ?? r.Kind ?? r.CopyKind ?? r.Copy_Kind ?? '';
        const dir = directionCode(dirText.replace(/^Copy/i, ''));
        if (kind === 'copies') {
          const src = r.Source_Agent_Id ?? '';
          const dst = r.Destination_Agent_Id ?? '';
          if (dir === Direction.HtoD) model.setAgentType(src, 'CPU'), model.setAgentType(dst, 'GPU');
          if (dir === Direction.DtoH) model.setAgentType(src, 'GPU'), model.setAgentType(dst, 'CPU');
        }
        const start = t(beginCol);
        const end = t(endCol);
        if (end < start) throw new BadInputError(`${where} ends before it starts`, file);
        const hostCol = dir === Direction.HtoD ? srcAddrCol : dir === Direction.DtoH ? dstAddrCol : undefined;
        model.copies.push({
          start,
          end,
          dir,
          ...kindsByDirection(dir),
          stream: optNumber(r.Stream_Id, `${where} Stream_Id`, file) ?? 0,
          device: 0,
          correlation: optNumber(r.Correlation_Id, `${where} Correlation_Id`, file) ?? Number.NaN,
          bytes: bytesCol ? (optNumber(r[bytesCol], `${where} ${bytesCol}`, file) ?? Number.NaN) : Number.NaN,
          hostAddr: hostCol ? (optNumber(r[hostCol], `${where} ${hostCol}`, file) ?? Number.NaN) : Number.NaN,
          op: -1,
        });
        if (dir === Direction.HtoD || dir === Direction.DtoH) model.hostKindUnknown++;
        return;
      }
      case 'kernels': {
        const start = t('Start_Timestamp');
        const end = t('End_Timestamp');
        if (end < start) throw new BadInputError(`${where} ends before it starts`, file);
        model.kernels.push({
          start,
          end,
          stream: optNumber(r.Stream_Id ?? r.Queue_Id, `${where} Stream_Id`, file) ?? 0,
          device: optNumber(String(r.Agent_Id ?? '').replace(/^\D+/, ''), `${where} Agent_Id`, file) ?? 0,
        });
        model.addKernelName(r.Kernel_Name ?? '', end - start);
        return;
      }
      case 'dispatches': {
        const start = t('BeginNs');
        const end = t('EndNs');
        if (end < start) throw new BadInputError(`${where} ends before it starts`, file);
        model.kernels.push({
          start,
          end,
          stream: optNumber(r['queue-id'], `${where} queue-id`, file) ?? 0,
          device: optNumber(r['gpu-id'], `${where} gpu-id`, file) ?? 0,
        });
        model.addKernelName((r.KernelName ?? '').replace(/ \[clone \.kd\]$/, ''), end - start);
        return;
      }
      case 'api': {
        if (!/^(HIP|HSA)/.test(r.Domain ?? '')) return;
        const start = t('Start_Timestamp');
        model.runtime.push({
          start,
          end: t('End_Timestamp'),
          api: classifyApi(r.Function ?? ''),
          thread: optNumber(r.Thread_Id, `${where} Thread_Id`, file) ?? 0,
          correlation: optNumber(r.Correlation_Id, `${where} Correlation_Id`, file) ?? Number.NaN,
        });
        return;
      }
      case 'allocations': {
        const op = (r.Operation ?? '').toUpperCase();
        // scratch memory is the runtime's per-kernel workspace, not the application's allocations
        if (op.startsWith('SCRATCH')) return;
        const isFree = /FREE|RELEASE/.test(op);
        if (!isFree && !/ALLOCATE|CREATE/.test(op)) return;
        const size = reqNumber(r.Allocation_Size, `${where} Allocation_Size`, file);
        const agent = (r.Agent_Id ?? '').trim();
        model.allocs.push({
          time: t('Start_Timestamp'),
          bytes: isFree ? -size : size,
          device: -1,
          address: reqNumber(r.Address, `${where} Address`, file),
          allocated: Number.NaN,
          reserved: Number.NaN,
          host: Number.NaN,
          agent: agent ? model.agentIndex(agent) : -1,
          level: AllocLevel.driver,
        });
        return;
      }
      case 'agents': {
        const type = (r.Agent_Type ?? '').toUpperCase();
        if (type !== 'CPU' && type !== 'GPU') return;
        for (const c of ['Logical_Node_Id', 'Node_Id']) if (r[c] !== undefined && r[c] !== '') model.setAgentType(r[c]!, type);
        if (type === 'GPU' && r.Name)
          model.devices.set(
            optNumber(r.Logical_Node_Id ?? r.Node_Id, `${where} Node_Id`, file) ?? model.devices.size,
            `${r.Product_Name || r.Name} (${r.Name})`,
          );
        return;
      }
      case 'stats': {
        const name = r.Name ?? '';
        const calls = reqNumber(r.Calls, `${where} Calls`, file);
        const totalNs = reqNumber(r.TotalDurationNs, `${where} TotalDurationNs`, file);
        addStatsRow(model, statsKind ?? statsRowKind(name), name, calls, totalNs, leftOut);
        return;
      }
    }
  };
  const rows = await readCsv(file, onHeader, onRow, { progress, elastic: (cols) => elasticColumn(rocprofCsvKind(cols), cols) });
  if (!kind) throw new BadInputError('the file is empty', file);
  if (v2) {
    v2.done();
    return;
  }
  if (leftOut.size > 0)
    model.note(
      `${file}: ${[...leftOut].map(([n, k]) => `"${n}" (${k} calls)`).join(', ')} left out of the totals: barriers and HIP commands that are neither kernels nor copies`,
    );
  if (rows === 0 && kind !== 'agents') model.note(`${file}: the ${kind} table has no rows`);
  if (kind === 'copies' && !bytesCol)
    model.note('rocprofv3 memory_copy_trace rows carry no byte counts: bandwidth-based findings need an nsys or Kineto trace, or a rocprofv3 JSON with bytes');
  model.formats.add(kind === 'stats' ? 'rocprof-stats' : kind === 'copy-rows' || kind === 'dispatches' ? 'rocprof' : 'rocprofv3-csv');
  // a rocprofv3 CSV is one trace kind per file: the kind it holds was traced, even with no rows
  const traced = { copies: 'copies', kernels: 'kernels', api: 'runtime', allocations: 'allocations' } as const;
  if (kind && kind in traced) model.traced(traced[kind as keyof typeof traced]);
}

/** A numeric id or address as rocprofiler-sdk's JSON writes it: a number, or { handle } / { value } / { internal }. */
function idOf(v: Json | undefined, what: string, file: string): number | undefined {
  if (isObj(v)) return optNumber(v.handle ?? v.value ?? v.internal ?? v.ptr, what, file);
  return optNumber(v, what, file);
}

/**
 * Reads a rocprofv3 JSON file (`--output-format json`): agents, strings (kind and operation names), kernel_symbols,
 * and buffer_records.{memory_copy, kernel_dispatch, hip_api, memory_allocation}, streamed.
 * @throws BadInputError for malformed or non-rocprofv3 JSON.
 */
export async function importRocprofJson(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  const kinds: Array<{ kind: string; operations: string[] }> = [];
  const agents = new Map<number, 'CPU' | 'GPU'>();
  /** GPU agents' handles to their device number (the logical node id, as the agents table names devices). */
  const gpuOf = new Map<number, number>();
  const symbols = new Map<number, string>();
  type Rec = { cat: string; r: Obj; where: string };
  const records: Rec[] = [];
  let sawTool = false;
  const opName = (r: Obj, where: string): string => {
    const k = optNumber(r.kind, `${where}.kind`, file);
    const o = optNumber(r.operation, `${where}.operation`, file);
    return (k !== undefined && o !== undefined ? kinds[k]?.operations[o] : undefined) ?? '';
  };
  const time = (r: Obj, key: string, where: string): number => model.time(reqTimestamp(r[key], `${where}.${key}`, file));
  // path: rocprofiler-sdk-tool [, i] , section , ...
  const rel = (p: readonly PathKey[]): readonly PathKey[] | undefined => {
    if (p[0] !== 'rocprofiler-sdk-tool') return undefined;
    sawTool = true;
    return typeof p[1] === 'number' ? p.slice(2) : p.slice(1);
  };
  const select = (p: readonly PathKey[]): boolean => {
    const q = rel(p);
    if (!q) return false;
    if (q.length === 2 && q[0] === 'agents' && typeof q[1] === 'number') return true;
    if (q.length === 2 && q[0] === 'kernel_symbols') return true;
    if (q.length === 3 && q[0] === 'strings' && q[1] === 'buffer_records' && typeof q[2] === 'number') return true;
    return (
      q.length === 3 &&
      q[0] === 'buffer_records' &&
      typeof q[1] === 'string' &&
      typeof q[2] === 'number' &&
      ['memory_copy', 'kernel_dispatch', 'hip_api', 'memory_allocation'].includes(q[1])
    );
  };
  const onValue = (p: readonly PathKey[], v: Json): void => {
    const q = rel(p)!;
    const where = p.join('.');
    if (!isObj(v)) throw new BadInputError(`${where} is ${describe(v)}, not an object`, file);
    if (q[0] === 'agents') {
      const id = idOf(v.id, `${where}.id`, file);
      const type = v.type === 1 || v.type === 'CPU' ? 'CPU' : v.type === 2 || v.type === 'GPU' ? 'GPU' : undefined;
      if (id !== undefined && type) agents.set(id, type);
      if (type === 'GPU') {
        const device = optNumber(v.logical_node_id, `${where}.logical_node_id`, file) ?? model.devices.size;
        if (id !== undefined) gpuOf.set(id, device);
        if (typeof v.name === 'string') model.devices.set(device, `${typeof v.product_name === 'string' ? v.product_name : v.name} (${v.name})`);
      }
    } else if (q[0] === 'kernel_symbols') {
      const id = idOf(v.kernel_id, `${where}.kernel_id`, file) ?? (typeof q[1] === 'number' ? q[1] : Number(q[1]));
      const name = v.formatted_kernel_name ?? v.kernel_name ?? v.truncated_kernel_name;
      if (typeof name === 'string' && Number.isFinite(id)) symbols.set(id, name);
    } else if (q[0] === 'strings') {
      kinds[q[2] as number] = { kind: typeof v.kind === 'string' ? v.kind : '', operations: Array.isArray(v.operations) ? v.operations.map(String) : [] };
    } else if (kinds.length > 0) {
      // rocprofv3 writes strings and agents before buffer_records: records are handled as they stream past
      for (const rec of records.splice(0)) handle(rec);
      handle({ cat: q[1] as string, r: v, where });
    } else {
      if (records.length >= 1_000_000) throw new BadInputError('more than a million records before the "strings" table: cannot name their operations', file);
      records.push({ cat: q[1] as string, r: v, where });
    }
  };
  let copiesWithoutBytes = 0;
  function handle({ cat, r, where }: Rec): void {
    const start = time(r, 'start_timestamp', where);
    const end = cat === 'memory_allocation' && r.end_timestamp === undefined ? start : time(r, 'end_timestamp', where);
    if (end < start) throw new BadInputError(`${where} ends before it starts`, file);
    const correlation = isObj(r.correlation_id) ? (optNumber(r.correlation_id.internal, `${where}.correlation_id`, file) ?? Number.NaN) : Number.NaN;
    if (cat === 'memory_copy') {
      const s = agents.get(idOf(r.src_agent_id, `${where}.src_agent_id`, file) ?? -1);
      const d = agents.get(idOf(r.dst_agent_id, `${where}.dst_agent_id`, file) ?? -1);
      let dir = directionCode(opName(r, where));
      if (dir === Direction.unknown && s && d)
        dir = s === 'CPU' ? (d === 'GPU' ? Direction.HtoD : Direction.HtoH) : d === 'CPU' ? Direction.DtoH : Direction.DtoD;
      const bytes = optNumber(r.bytes ?? r.size, `${where}.bytes`, file) ?? Number.NaN;
      if (Number.isNaN(bytes)) copiesWithoutBytes++;
      const hostAddr =
        dir === Direction.HtoD
          ? idOf(r.src_address, `${where}.src_address`, file)
          : dir === Direction.DtoH
            ? idOf(r.dst_address, `${where}.dst_address`, file)
            : undefined;
      if (dir === Direction.HtoD || dir === Direction.DtoH) model.hostKindUnknown++;
      model.copies.push({
        start,
        end,
        dir,
        src: dir === Direction.HtoD ? MemKind.unknown : MemKind.device,
        dst: dir === Direction.DtoH ? MemKind.unknown : MemKind.device,
        stream: idOf(r.stream_id, `${where}.stream_id`, file) ?? 0,
        device: gpuOf.get(idOf(dir === Direction.HtoD ? r.dst_agent_id : r.src_agent_id, `${where}.agent_id`, file) ?? -1) ?? 0,
        correlation,
        bytes,
        hostAddr: hostAddr ?? Number.NaN,
        op: -1,
      });
    } else if (cat === 'kernel_dispatch') {
      const info = isObj(r.dispatch_info) ? r.dispatch_info : {};
      const kid = idOf(info.kernel_id, `${where}.dispatch_info.kernel_id`, file);
      const device = gpuOf.get(idOf(info.agent_id, `${where}.dispatch_info.agent_id`, file) ?? -1) ?? 0;
      model.kernels.push({ start, end, stream: idOf(r.stream_id ?? info.queue_id, `${where}.stream_id`, file) ?? 0, device });
      model.addKernelName(symbols.get(kid ?? -1) ?? `kernel ${kid ?? '?'}`, end - start);
    } else if (cat === 'hip_api') {
      model.runtime.push({ start, end, api: classifyApi(opName(r, where)), thread: optNumber(r.thread_id, `${where}.thread_id`, file) ?? 0, correlation });
    } else {
      const op = opName(r, where).toUpperCase();
      const isFree = /FREE|RELEASE/.test(op);
      const size = optNumber(r.allocation_size, `${where}.allocation_size`, file) ?? 0;
      const agentId = idOf(r.agent_id, `${where}.agent_id`, file);
      const type = agentId !== undefined ? agents.get(agentId) : undefined;
      model.allocs.push({
        time: start,
        bytes: isFree ? -size : size,
        device: -1,
        address: idOf(r.address, `${where}.address`, file) ?? Number.NaN,
        allocated: Number.NaN,
        reserved: Number.NaN,
        host: type === 'CPU' ? 1 : type === 'GPU' ? 0 : Number.NaN,
        agent: -1,
        level: AllocLevel.driver,
      });
    }
  }
  await walkJson(file, select, onValue, { progress });
  if (!sawTool) throw new BadInputError('no "rocprofiler-sdk-tool" key: not a rocprofv3 JSON file', file);
  for (const rec of records.splice(0)) handle(rec);
  if (copiesWithoutBytes > 0) model.note(`${copiesWithoutBytes} rocprofv3 memory copies carry no byte count: bandwidth-based findings skip them`);
  model.formats.add('rocprofv3-json');
}
