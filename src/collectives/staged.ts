/**
 * Collectives staged through host memory: every rank's send buffer is copied to the host, the operation runs on the
 * CPU, and each rank's result is copied back. On the host backend this is the real implementation (its devices are
 * CPU memory); on a GPU backend it is the baseline that shows what NCCL or RCCL save, with pinned staging buffers.
 */
import { ErrorCode, GpuError } from '../errors.js';
import type { Allocation } from '../memory/allocation.js';
import type { MemoryRuntime as Runtime } from '../memory/runtime.js';
import { bufferBytes, checkCall, DTYPES, type CollectiveCall, type DType, type Reduction } from './types.js';

type Typed = Int8Array | Uint8Array | Int32Array | Uint32Array | Float32Array | Float64Array;
const CTORS = { int8: Int8Array, uint8: Uint8Array, int32: Int32Array, uint32: Uint32Array, float32: Float32Array, float64: Float64Array } as const;
const REDUCE: Record<Reduction, (a: number, b: number) => number> = {
  sum: (a, b) => a + b,
  prod: (a, b) => a * b,
  max: (a, b) => Math.max(a, b),
  min: (a, b) => Math.min(a, b),
};

/** One communicator's common surface (NCCL, RCCL, or staged through the host). */
export interface Communicator extends Disposable {
  readonly library: 'nccl' | 'rccl' | 'staged';
  /** Device of each rank. */
  readonly devices: readonly number[];
  /** The library's version, where it says. */
  readonly version: string | undefined;
  /** Runs (staged) or enqueues on each rank's stream (NCCL, RCCL) one collective, checked first. */
  run(call: CollectiveCall): void;
  /** Waits until everything run so far has finished on every rank. */
  synchronize(): void;
}

export class StagedCommunicator implements Communicator {
  readonly library = 'staged' as const;
  readonly version = undefined;
  private readonly staging: Allocation[] = [];
  private disposed = false;

  /** @param pinned stage through pinned host memory (default on a GPU backend) rather than pageable. */
  constructor(
    private readonly rt: Runtime,
    readonly devices: readonly number[],
    private readonly pinned = rt.backend.capabilities.gpuMemory,
  ) {
    if (devices.length < 1) throw new GpuError(ErrorCode.INVALID_ARGUMENT, 'a communicator needs at least one device');
    for (const d of devices) rt.device(d);
  }

  run(call: CollectiveCall): void {
    if (this.disposed) throw new GpuError(ErrorCode.DISPOSED, 'this communicator was disposed');
    checkCall(call, this.devices, true);
    const n = this.devices.length;
    const need = bufferBytes(call.op, call.count, call.dtype, n);
    const c = call.count;
    // each rank's staging buffer holds its send bytes, then its result: sized once, before anything is copied in
    for (let r = 0; r < n; r++) this.ensure(r, need.send + need.recv);
    call.send.forEach((a, r) => {
      if (need.send > 0) this.rt.copy(this.staging[r]!, a, { bytes: need.send });
    });
    const out = call.recv.map((_, r) => this.view(r, need.send, need.recv, call.dtype));
    const view = (r: number): Typed => this.view(r, 0, need.send, call.dtype);
    const reduce = REDUCE[call.reduction ?? 'sum'];
    switch (call.op) {
      case 'all-reduce':
      case 'reduce-scatter': {
        const total = call.op === 'all-reduce' ? c : c * n;
        const acc = new CTORS[call.dtype](total) as Typed;
        acc.set(view(0).subarray(0, total));
        for (let r = 1; r < n; r++) {
          const v = view(r);
          for (let i = 0; i < total; i++) acc[i] = reduce(acc[i]!, v[i]!);
        }
        for (let r = 0; r < n; r++) out[r]!.set(call.op === 'all-reduce' ? acc : acc.subarray(r * c, (r + 1) * c));
        break;
      }
      case 'all-gather':
        for (let r = 0; r < n; r++) for (let s = 0; s < n; s++) out[r]!.set(view(s).subarray(0, c), s * c);
        break;
      case 'broadcast': {
        const src = view(call.root ?? 0).subarray(0, c);
        for (let r = 0; r < n; r++) out[r]!.set(src);
        break;
      }
      case 'all-to-all':
        // chunk j of rank i's send buffer becomes chunk i of rank j's receive buffer
        for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) out[j]!.set(view(i).subarray(j * c, (j + 1) * c), i * c);
        break;
      case 'send-recv':
        // a ring: rank r sends to r + 1 and receives from r - 1
        for (let r = 0; r < n; r++) out[(r + 1) % n]!.set(view(r).subarray(0, c));
        break;
    }
    for (let r = 0; r < n; r++) if (need.recv > 0) this.rt.copy(call.recv[r]!, this.staging[r]!, { bytes: need.recv, srcOffset: need.send });
  }

  synchronize(): void {
    // every run finished before it returned
  }

  private view(r: number, offset: number, bytes: number, dtype: DType): Typed {
    return this.staging[r]!.typed(CTORS[dtype] as never, offset, bytes / DTYPES[dtype]) as Typed;
  }

  /** Rank r's staging buffer, at least `bytes` long (room for the send and the receive side). */
  private ensure(r: number, bytes: number): void {
    const cur = this.staging[r];
    if (cur && cur.bytes >= bytes) return;
    const keep = cur ? Math.max(bytes, cur.bytes * 2) : Math.max(bytes, 4096);
    cur?.free();
    this.staging[r] = this.pinned ? this.rt.allocPinned(keep) : this.rt.allocPageable(keep);
  }

  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const a of this.staging) a?.free();
    this.staging.length = 0;
  }
}
