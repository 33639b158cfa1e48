/**
 * rocprofv3's default output since ROCm 7.0: the rocpd SQLite database (HOST/PID_results.db). It is read through
 * the views rocprofiler-sdk documents and its own `rocpd convert` reads: `rocpd_info_agent` for devices, `kernels`,
 * `memory_copies`, `memory_allocations` and `regions` (API calls by category) for events. Those views give the
 * same columns (start, end, name, size, agent indexes) over both table layouts rocpd has had (timestamps in a
 * table of their own, or on the rows), so the reader does not depend on either; where a column was renamed between
 * versions (agent_log_index / agent_logical_index), both names are tried. Timestamps are nanoseconds, read as
 * bigints. What the CSV and JSON readers do with a row, this one does with the same row.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { describe } from '../../input/numbers.js';
import { columnsOf, openSqlite, tablesOf, type SqliteDb, type SqlRow } from '../../input/sqlite.js';
import { AllocLevel, classifyApi, Direction, kindsByDirection, type TraceModel } from '../model.js';
import { directionCode } from './fields.js';

/**
 * Reads a rocpd database into the model.
 * @throws BadInputError when it is not a rocpd database or holds values of the wrong type; GpuError (UNSUPPORTED)
 *   when no SQLite binding is installed.
 */
export async function importRocpd(file: string, model: TraceModel, progress?: (rows: number) => void): Promise<void> {
  const db = openSqlite(file, { what: 'a rocprofv3 database (rocpd)' });
  try {
    read(db, file, model, progress);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as a rocprofv3 database: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
  model.formats.add('rocpd');
}

function read(db: SqliteDb, file: string, model: TraceModel, progress?: (rows: number) => void): void {
  const views = tablesOf(db);
  const data = ['kernels', 'memory_copies', 'memory_allocations', 'regions'].filter((v) => views.has(v));
  if (data.length === 0)
    throw new BadInputError('no rocpd data views (kernels, memory_copies, memory_allocations, regions): not a database rocprofv3 wrote', file);
  let rows = 0;
  /** Rows of a view: each wanted column under its first name the view has, NULL where it has none. */
  const each = function* (view: string, want: Record<string, readonly string[]>): Generator<SqlRow> {
    if (!views.has(view)) return;
    const have = columnsOf(db, view);
    const cols = Object.entries(want).map(([as, names]) => {
      const c = names.find((n) => have.has(n));
      return c ? `"${c}" AS "${as}"` : `NULL AS "${as}"`;
    });
    for (const r of db.iterate(`SELECT ${cols.join(', ')} FROM "${view}"`)) {
      if (++rows % 200_000 === 0) progress?.(rows);
      yield r;
    }
  };
  const int = (view: string, c: string, v: unknown): number => {
    if (v === null || v === undefined) return Number.NaN;
    if (typeof v === 'bigint' && v >= 0n && v <= 2n ** 63n) return Number(v);
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
    throw new BadInputError(`view ${view} column ${c} holds ${describe(typeof v === 'bigint' ? String(v) : v)}, not a count or an address`, file);
  };
  const span = (view: string, r: SqlRow): [number, number] => {
    for (const c of ['start', 'end'])
      if (typeof r[c] !== 'bigint' && typeof r[c] !== 'number')
        throw new BadInputError(`view ${view} column ${c} holds ${describe(r[c] ?? null)}, not a timestamp`, file);
    const start = model.time(r.start as bigint);
    const end = model.time(r.end as bigint);
    if (end < start) throw new BadInputError(`view ${view}: a row ends before it starts`, file);
    return [start, end];
  };
  const text = (v: unknown): string => (typeof v === 'string' ? v : '');
  const CORR = ['stack_id', 'corr_id', 'correlation_id'] as const;
  const LOG = (p: string): readonly string[] => [`${p}agent_log_index`, `${p}agent_logical_index`, `${p}agent_abs_index`, `${p}agent_absolute_index`];

  // Devices: the GPU agents, numbered by their logical index as rocprofv3's CSV and JSON number them
  if (views.has('rocpd_info_agent')) {
    for (const r of each('rocpd_info_agent', {
      type: ['type'],
      index: ['logical_index', 'absolute_index', 'id'],
      name: ['name'],
      product: ['product_name'],
      extdata: ['extdata'],
    })) {
      const type = text(r.type).toUpperCase();
      const index = int('rocpd_info_agent', 'logical_index', r.index);
      if (type !== 'GPU' && type !== 'CPU') continue;
      model.setAgentType(String(index), type);
      if (type !== 'GPU' || Number.isNaN(index)) continue;
      const name = text(r.name);
      model.devices.set(index, text(r.product) ? `${text(r.product)}${name ? ` (${name})` : ''}` : name);
      const mem = localMemory(r.extdata);
      if (mem !== undefined) model.deviceMemory.set(index, mem);
    }
  }

  let V = 'kernels';
  for (const r of each(V, { start: ['start'], end: ['end'], name: ['name'], agent: LOG(''), stream: ['stream_id'], queue: ['queue_id'] })) {
    const [start, end] = span(V, r);
    const stream = int(V, 'stream_id', r.stream);
    model.kernels.push({
      start,
      end,
      stream: Number.isNaN(stream) ? int(V, 'queue_id', r.queue) || 0 : stream,
      device: int(V, 'agent_log_index', r.agent) || 0,
    });
    model.addKernelName(text(r.name) || 'kernel', end - start);
  }

  V = 'memory_copies';
  for (const r of each(V, {
    start: ['start'],
    end: ['end'],
    name: ['name'],
    size: ['size'],
    srcType: ['src_agent_type'],
    dstType: ['dst_agent_type'],
    src: LOG('src_'),
    dst: LOG('dst_'),
    srcAddr: ['src_address'],
    dstAddr: ['dst_address'],
    stream: ['stream_id'],
    queue: ['queue_id'],
    corr: CORR,
  })) {
    const [start, end] = span(V, r);
    const s = text(r.srcType).toUpperCase();
    const d = text(r.dstType).toUpperCase();
    let dir = directionCode(text(r.name));
    if (dir === Direction.unknown && s && d)
      dir = s === 'CPU' ? (d === 'CPU' ? Direction.HtoH : Direction.HtoD) : d === 'CPU' ? Direction.DtoH : Direction.DtoD;
    const hostAddr = dir === Direction.HtoD ? int(V, 'src_address', r.srcAddr) : dir === Direction.DtoH ? int(V, 'dst_address', r.dstAddr) : Number.NaN;
    if (dir === Direction.HtoD || dir === Direction.DtoH) model.hostKindUnknown++;
    const stream = int(V, 'stream_id', r.stream);
    model.copies.push({
      start,
      end,
      dir,
      ...kindsByDirection(dir),
      bytes: int(V, 'size', r.size),
      stream: Number.isNaN(stream) ? int(V, 'queue_id', r.queue) || 0 : stream,
      device: int(V, 'agent_log_index', dir === Direction.HtoD ? r.dst : r.src) || 0,
      correlation: int(V, 'stack_id', r.corr),
      hostAddr,
      op: -1,
    });
  }

  V = 'memory_allocations';
  for (const r of each(V, {
    start: ['start'],
    end: ['end'],
    type: ['type'],
    level: ['level'],
    size: ['size'],
    address: ['address'],
    agentType: ['agent_type'],
  })) {
    const type = text(r.type).toUpperCase();
    // scratch memory is the runtime's per-kernel workspace, not the application's allocations
    if (text(r.level).toUpperCase() === 'SCRATCH' || (type !== 'ALLOC' && type !== 'FREE')) continue;
    const [start] = span(V, r);
    const size = int(V, 'size', r.size);
    const agentType = text(r.agentType).toUpperCase();
    model.allocs.push({
      time: start,
      bytes: type === 'FREE' ? -(size || 0) : size,
      device: -1,
      address: int(V, 'address', r.address),
      allocated: Number.NaN,
      reserved: Number.NaN,
      host: agentType === 'CPU' ? 1 : agentType === 'GPU' ? 0 : Number.NaN,
      agent: -1,
      level: AllocLevel.driver,
    });
  }

  V = 'regions';
  for (const r of each(V, { start: ['start'], end: ['end'], name: ['name'], category: ['category'], tid: ['tid'], corr: CORR })) {
    // HIP and HSA calls, as the CSV reader keeps the HIP and HSA domains of the API trace; markers are left out
    if (!/^(HIP|HSA)/.test(text(r.category))) continue;
    const [start, end] = span(V, r);
    model.runtime.push({ start, end, api: classifyApi(text(r.name)), thread: int(V, 'tid', r.tid) || 0, correlation: int(V, 'stack_id', r.corr) });
  }
  progress?.(rows);
  if (model.kernels.length + model.copies.length + model.runtime.length + model.allocs.length === 0)
    model.note(
      `${file}: the rocpd database holds no kernels, copies, API calls or allocations (was rocprofv3 run with --kernel-trace, --memory-copy-trace or --runtime-trace?)`,
    );
}

/** The local memory size an agent's extdata records (rocprofiler's agent info), in bytes. */
function localMemory(extdata: unknown): number | undefined {
  if (typeof extdata !== 'string' || extdata.length > 1 << 20) return undefined;
  try {
    const v = (JSON.parse(extdata) as { local_mem_size?: unknown } | null)?.local_mem_size;
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined;
  } catch {
    return undefined;
  }
}
