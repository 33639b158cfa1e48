/**
 * rocprofv2 (rocprofiler's v2 tool, ROCm 5.5 to 6.x) CSV, as its file plugin writes it (ROCm/rocprofiler
 * plugin/file/file.cpp): one file per trace domain, each named PREFIX_PID.csv, with a blank line after the header:
 * - `hip_api_trace`: Domain,Function,Start_Timestamp,End_Timestamp,Correlation_ID (HIP_API_DOMAIN); a kernel
 *   launch's row carries the kernel's name as one more cell after Function, which the header does not name;
 * - `hsa_api_trace`: the same for HSA_API_DOMAIN;
 * - `hcc_ops_trace`: Domain,Operation,Kernel_Name,Start_Timestamp,Stop_Timestamp,Correlation_ID (HIP_OPS_DOMAIN):
 *   what HIP put on the GPU, by HIP's command names (KernelExecution with the kernel's name, CopyHostToDevice,
 *   FillBuffer, Marker, "Unknown command type": hip-ops.ts); copies carry no size;
 * - `async_copy_trace`: Domain,Operation,Start_Timestamp,Stop_Timestamp,Correlation_ID (HSA_OPS_DOMAIN, Operation
 *   COPY): HSA's copies, without a direction;
 * - `results`: one row per kernel dispatch (Dispatch_ID,GPU_ID,Queue_ID,...,Kernel_Name,Start_Timestamp,End_Timestamp,
 *   Correlation_ID, then counters), the kernels again where hcc_ops_trace is there too.
 * Versions of mid-2023 put a Record_ID column first and, in hip_api_trace, a Kernel_Name column. Cells are matched
 * from both ends of a row around the name column, which rows leave out or split (csv.ts: elastic).
 */
import { BadInputError } from '../../errors.js';
import type { CsvRow } from '../../input/csv.js';
import { optNumber, reqTimestamp } from '../../input/numbers.js';
import { classifyApi, Direction, kindsByDirection, type TraceModel } from '../model.js';
import { hipOpKind } from './hip-ops.js';
import { parseCopyName } from './kineto.js';

export type V2Kind = 'v2-api' | 'v2-ops' | 'v2-async-copies' | 'v2-dispatches';

/** Recognises a rocprofv2 CSV by its header; undefined when it is not one. */
export function rocprofV2Kind(columns: readonly string[]): V2Kind | undefined {
  const has = (c: string): boolean => columns.includes(c);
  if (has('Dispatch_ID') && has('GPU_ID') && has('Kernel_Name') && has('Start_Timestamp') && has('End_Timestamp')) return 'v2-dispatches';
  if (!has('Domain') || !has('Correlation_ID') || !has('Start_Timestamp')) return undefined;
  if (has('Function') && has('End_Timestamp')) return 'v2-api';
  if (has('Operation') && has('Stop_Timestamp')) return has('Kernel_Name') ? 'v2-ops' : 'v2-async-copies';
  return undefined;
}

/** The column a rocprofv2 table's rows may split or leave out. */
export function rocprofV2Elastic(kind: V2Kind, columns: readonly string[]): string | undefined {
  if (kind === 'v2-api') return columns.includes('Kernel_Name') ? 'Kernel_Name' : 'Function';
  return columns.includes('Kernel_Name') ? 'Kernel_Name' : undefined;
}

/** Reads one rocprofv2 table's rows into the model; `done` reports what the table held once it has been read. */
export class RocprofV2Table {
  private readonly other = new Map<string, number>();
  private copies = 0;

  constructor(
    private readonly kind: V2Kind,
    private readonly file: string,
    private readonly model: TraceModel,
  ) {}

  row(r: CsvRow, n: number): void {
    const where = `row ${n}`;
    const t = (c: string): number => this.model.time(reqTimestamp(r[c], `${where} ${c}`, this.file));
    const start = t('Start_Timestamp');
    const end = t(this.kind === 'v2-api' || this.kind === 'v2-dispatches' ? 'End_Timestamp' : 'Stop_Timestamp');
    if (end < start) throw new BadInputError(`${where} ends before it starts`, this.file);
    const correlation = optNumber(r.Correlation_ID, `${where} Correlation_ID`, this.file) ?? Number.NaN;
    if (this.kind === 'v2-dispatches') {
      const stream = optNumber(r.Queue_ID, `${where} Queue_ID`, this.file) ?? 0;
      this.model.kernels.push({ start, end, stream, device: optNumber(r.GPU_ID, `${where} GPU_ID`, this.file) ?? 0 });
      this.model.addKernelName((r.Kernel_Name ?? '').replace(/ \[clone \.kd\]$/, '') || 'kernel', end - start);
      return;
    }
    if (this.kind === 'v2-api') {
      if (!/^(HIP|HSA)_API/.test(r.Domain ?? '')) return;
      // a launch's row carries the kernel's name as a cell of its own after the function's
      const fn = (r.Function ?? '').split(', ')[0] ?? '';
      this.model.runtime.push({ start, end, api: classifyApi(fn), thread: 0, correlation });
      return;
    }
    this.op(this.kind === 'v2-ops' ? (r.Operation ?? '') : 'COPY', r.Kernel_Name ?? '', start, end, correlation);
  }

  private op(operation: string, kernel: string, start: number, end: number, correlation: number): void {
    const kind = operation === 'COPY' ? 'copy' : hipOpKind(operation === 'KernelExecution' && kernel ? kernel : operation);
    if (kind === 'barrier') return;
    if (kind === 'other') {
      this.other.set(operation, (this.other.get(operation) ?? 0) + 1);
      return;
    }
    if (kind === 'fill') {
      this.model.memsets.push({ start, end, bytes: Number.NaN, stream: 0, device: 0 });
      return;
    }
    if (kind === 'kernel') {
      this.model.kernels.push({ start, end, stream: 0, device: 0 });
      this.model.addKernelName(kernel.replace(/ \[clone \.kd\]$/, '') || operation, end - start);
      return;
    }
    const { dir } = parseCopyName(operation);
    if (dir === Direction.HtoD || dir === Direction.DtoH) this.model.hostKindUnknown++;
    this.copies++;
    this.model.copies.push({ start, end, dir, ...kindsByDirection(dir), bytes: Number.NaN, stream: 0, device: 0, correlation, hostAddr: Number.NaN, op: -1 });
  }

  /** Notes what the table left unsaid, and marks what it traced. */
  done(): void {
    if (this.other.size > 0)
      this.model.note(
        `${this.file}: ${[...this.other].map(([n, k]) => `${k} "${n}"`).join(', ')}: HIP commands that are neither kernels nor copies, left out of both`,
      );
    if (this.copies > 0)
      this.model.note(`${this.file}: rocprofv2 records copies without their sizes: size-based findings need rocprofv3, an nsys or a Kineto trace`);
    if (this.kind === 'v2-api') this.model.traced('runtime');
    else if (this.kind === 'v2-dispatches') this.model.traced('kernels');
    else if (this.kind === 'v2-async-copies') this.model.traced('copies');
    else this.model.traced('kernels', 'copies');
    this.model.formats.add('rocprofv2-csv');
  }
}
