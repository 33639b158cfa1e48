/**
 * Collective operations across the GPUs of one node: what they are, the element types and reductions, how their
 * bandwidth is counted (as nccl-tests counts it), and the checks every communicator runs before any native call.
 */
import type { Allocation } from '../memory/allocation.js';
import { DisposedError, ErrorCode, InvalidArgumentError } from '../errors.js';

export const COLLECTIVES = ['all-reduce', 'all-gather', 'reduce-scatter', 'broadcast', 'all-to-all', 'send-recv'] as const;
export type Collective = (typeof COLLECTIVES)[number];

export const DTYPES = { int8: 1, uint8: 1, int32: 4, uint32: 4, float32: 4, float64: 8 } as const;
export type DType = keyof typeof DTYPES;

export const REDUCTIONS = ['sum', 'prod', 'max', 'min'] as const;
export type Reduction = (typeof REDUCTIONS)[number];

/** One collective call: a send and a receive buffer per rank (rank i on the communicator's i-th device). */
export interface CollectiveCall {
  op: Collective;
  send: readonly Allocation[];
  recv: readonly Allocation[];
  /**
   * Elements per rank: all-reduce and broadcast, the whole buffer; all-gather, what each rank sends; reduce-scatter,
   * what each rank receives; all-to-all, what each rank sends to each other rank; send-recv, what each rank sends
   * to the next one in the ring.
   */
  count: number;
  dtype: DType;
  /** all-reduce and reduce-scatter (default sum). */
  reduction?: Reduction;
  /** broadcast (default 0). */
  root?: number;
}

/** The bytes each rank's send and receive buffers must hold for a call. */
export function bufferBytes(op: Collective, count: number, dtype: DType, ranks: number): { send: number; recv: number } {
  const e = count * DTYPES[dtype];
  switch (op) {
    case 'all-reduce':
    case 'broadcast':
    case 'send-recv':
      return { send: e, recv: e };
    case 'all-gather':
      return { send: e, recv: e * ranks };
    case 'reduce-scatter':
      return { send: e * ranks, recv: e };
    case 'all-to-all':
      return { send: e * ranks, recv: e * ranks };
  }
}

/**
 * The size nccl-tests reports for a call (its "size" column: all-gather the gathered buffer, reduce-scatter the
 * buffer before scattering, all-to-all a rank's whole send buffer) and the factor from algorithm bandwidth
 * (size / time) to bus bandwidth, nccl-tests' doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter
 * and all-to-all (n-1)/n; broadcast and send-recv 1.
 */
export function ncclTestsSize(op: Collective, count: number, dtype: DType, ranks: number): { bytes: number; busFactor: number } {
  const b = bufferBytes(op, count, dtype, ranks);
  const n = ranks;
  switch (op) {
    case 'all-reduce':
      return { bytes: b.send, busFactor: (2 * (n - 1)) / n };
    case 'all-gather':
      return { bytes: b.recv, busFactor: (n - 1) / n };
    case 'reduce-scatter':
      return { bytes: b.send, busFactor: (n - 1) / n };
    case 'all-to-all':
      return { bytes: b.send, busFactor: (n - 1) / n };
    case 'broadcast':
    case 'send-recv':
      return { bytes: b.send, busFactor: 1 };
  }
}

/**
 * Checks a call against the communicator's devices before any native call: one buffer per rank on that rank's
 * device (or host memory the device can reach), large enough, live; a whole, non-negative count; a known element
 * type, reduction and root.
 * @throws InvalidArgumentError, DisposedError naming the rank and the buffer
 */
export function checkCall(call: CollectiveCall, devices: readonly number[], acceptHost: boolean): void {
  const fail = (msg: string, code: (typeof ErrorCode)[keyof typeof ErrorCode] = ErrorCode.INVALID_ARGUMENT): never => {
    throw new InvalidArgumentError(`${call.op}: ${msg}`, code);
  };
  if (!(COLLECTIVES as readonly string[]).includes(call.op)) fail(`unknown collective (one of ${COLLECTIVES.join(', ')})`);
  if (!(call.dtype in DTYPES)) fail(`unknown element type ${String(call.dtype)} (one of ${Object.keys(DTYPES).join(', ')})`);
  if (!Number.isSafeInteger(call.count) || call.count < 0) fail(`count must be a whole number of elements, not ${String(call.count)}`, ErrorCode.INVALID_SIZE);
  if (call.reduction !== undefined && !(REDUCTIONS as readonly string[]).includes(call.reduction)) fail(`unknown reduction ${String(call.reduction)}`);
  const n = devices.length;
  if (call.root !== undefined && (!Number.isInteger(call.root) || call.root < 0 || call.root >= n))
    fail(`root ${String(call.root)} is not a rank (0 to ${n - 1})`);
  const need = bufferBytes(call.op, call.count, call.dtype, n);
  for (const [name, list, bytes] of [
    ['send', call.send, need.send],
    ['recv', call.recv, need.recv],
  ] as const) {
    if (list.length !== n) fail(`${n} ranks need ${n} ${name} buffers, got ${list.length}`);
    list.forEach((a, r) => {
      if (a.disposed) throw new DisposedError(`${call.op}: the ${name} buffer of rank ${r} was already freed`);
      if (a.device !== undefined ? a.device !== devices[r] : !acceptHost || a.deviceAddress === undefined)
        fail(
          `the ${name} buffer of rank ${r} is ${a.device !== undefined ? `on device ${a.device}` : `${a.kind} host memory the device cannot reach`}, not on device ${devices[r]}`,
          ErrorCode.WRONG_DEVICE,
        );
      if (a.bytes < bytes)
        fail(`the ${name} buffer of rank ${r} holds ${a.bytes} bytes; ${call.count} ${call.dtype} elements need ${bytes}`, ErrorCode.OUT_OF_BOUNDS);
    });
  }
}
