/**
 * CUPTI's activity records as both Nsight Systems exports and nvprof databases store them, one table per kind
 * with CUPTI's field names (start, end, bytes, streamId, deviceId, correlationId): copies, memsets, kernels and
 * synchronisations into the model. The two tools differ in their enumerations (Nsight renumbered CUPTI's memory
 * kinds) and in where names live; each reader passes its own.
 */
import { Direction, MemKind, SyncKind, type TraceModel } from '../model.js';
import type { SqliteRows } from './sqlite-rows.js';

/** CUPTI's copy kinds (CUpti_ActivityMemcpyKind), which Nsight Systems keeps: 1 HtoD, 2 DtoH, 3 HtoA ... 10 PtoP. */
export const CUPTI_COPY_KIND: Readonly<Record<number, number>> = {
  1: Direction.HtoD,
  2: Direction.DtoH,
  3: Direction.HtoD,
  4: Direction.DtoH,
  5: Direction.DtoD,
  6: Direction.DtoD,
  7: Direction.DtoD,
  8: Direction.DtoD,
  9: Direction.HtoH,
  10: Direction.PtoP,
};
/** CUPTI's synchronisation types (CUpti_ActivitySynchronizationType), which Nsight Systems keeps. */
export const CUPTI_SYNC_TYPE: Readonly<Record<number, number>> = { 1: SyncKind.event, 2: SyncKind.streamWait, 3: SyncKind.stream, 4: SyncKind.device };

/** Puts one memcpy record into the model as a copy, with its direction and memory kinds already decoded. */
export function pushCopy(
  model: TraceModel,
  { int }: SqliteRows,
  T: string,
  r: Record<string, unknown>,
  at: { start: number; end: number; dir: number; src: number; dst: number },
): void {
  const { dir, src, dst } = at;
  if ((dir === Direction.HtoD && src === MemKind.unknown) || (dir === Direction.DtoH && dst === MemKind.unknown)) model.hostKindUnknown++;
  model.copies.push({
    ...at,
    bytes: int(T, 'bytes', r.bytes),
    stream: int(T, 'streamId', r.streamId) || 0,
    device: int(T, 'deviceId', r.deviceId) || 0,
    correlation: int(T, 'correlationId', r.correlationId),
    hostAddr: Number.NaN,
    op: -1,
  });
}

/** The memset records of table T. */
export function readMemsets(model: TraceModel, { each, int, span }: SqliteRows, T: string): void {
  for (const r of each(T, ['start', 'end'], ['bytes', 'streamId', 'deviceId'])) {
    const [start, end] = span(T, r);
    model.memsets.push({
      start,
      end,
      bytes: int(T, 'bytes', r.bytes),
      stream: int(T, 'streamId', r.streamId) || 0,
      device: int(T, 'deviceId', r.deviceId) || 0,
    });
  }
}

/** The kernel records of table T, named by `nameOf` from the columns `nameColumns`. */
export function readKernels(
  model: TraceModel,
  { each, int, span }: SqliteRows,
  T: string,
  nameColumns: string[],
  nameOf: (r: Record<string, unknown>) => string | undefined,
): void {
  for (const r of each(T, ['start', 'end'], [...nameColumns, 'streamId', 'deviceId'])) {
    const [start, end] = span(T, r);
    model.kernels.push({ start, end, stream: int(T, 'streamId', r.streamId) || 0, device: int(T, 'deviceId', r.deviceId) || 0 });
    model.addKernelName(nameOf(r) ?? 'kernel', end - start);
  }
}

/**
 * The synchronisation records of table T; `typeColumn` names the kind (syncType in Nsight's exports, type in
 * nvprof's), decoded by `types`. A stream of -1 (or CUPTI's invalid 0xffffffff) is no one stream.
 */
export function readSyncs(model: TraceModel, { each, int, span }: SqliteRows, T: string, typeColumn: string, types: Record<number, number>): void {
  for (const r of each(T, ['start', 'end'], ['streamId', typeColumn, 'correlationId'])) {
    const [start, end] = span(T, r);
    const stream = int(T, 'streamId', r.streamId);
    model.syncs.push({
      start,
      end,
      stream: Number.isNaN(stream) || stream < 0 || stream === 0xffffffff ? -1 : stream,
      kind: types[int(T, typeColumn, r[typeColumn])] ?? SyncKind.unknown,
      correlation: int(T, 'correlationId', r.correlationId),
    });
  }
}
