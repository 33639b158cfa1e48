/**
 * NCCL (NVIDIA) and RCCL (AMD, the same API), bound in backend/native/nccl-ffi.ts: one communicator over the node's GPUs from one
 * process (ncclCommInitAll), each collective enqueued on every rank's stream inside one ncclGroupStart/End, as
 * nccl-tests does. Buffers are checked in TypeScript first (collectives/types.ts). Prototypes follow nccl.h:
 * ncclComm_t and cudaStream_t are pointers, ncclDataType_t and ncclRedOp_t the enums below.
 */
import { ErrorCode, GpuError } from '../errors.js';
import { SourcedDeviceMemory } from '../memory/allocation.js';
import type { MemoryRuntime as Runtime } from '../memory/runtime.js';
import { checkSize } from '../memory/validate.js';
import { loadNccl, type NcclLibrary } from '../backend/native/nccl-ffi.js';
import type { Stream } from '../stream/stream.js';
import type { Communicator } from './staged.js';

export { loadNccl, NCCL_PROTOTYPES, type NcclLibrary } from '../backend/native/nccl-ffi.js';

/** ncclDataType_t and ncclRedOp_t (nccl.h). */
const NCCL_DTYPE: Record<DType, number> = { int8: 0, uint8: 1, int32: 2, uint32: 3, float32: 7, float64: 8 };
const NCCL_OP: Record<Reduction, number> = { sum: 0, prod: 1, max: 2, min: 3 };

import { checkCall, type CollectiveCall, type DType, type Reduction } from './types.js';

/**
 * Device memory from ncclMemAlloc, registered with one rank's communicator (ncclCommRegister): NCCL can then use
 * it in place (zero-copy, user-buffer registration) instead of copying through its own buffers. Freeing it
 * deregisters it and gives it back with ncclMemFree.
 */
export class NcclBuffer extends SourcedDeviceMemory {}

/** A communicator over the GPUs of this node through NCCL or RCCL. */
export class NcclCommunicator implements Communicator {
  readonly library: 'nccl' | 'rccl';
  readonly version: string;
  private readonly comms: number[];
  private readonly streams: Stream[];
  private readonly buffers = new Set<NcclBuffer>();
  private disposed = false;

  /**
   * @throws BackendUnavailableError without NCCL / RCCL; GpuError (NATIVE) when ncclCommInitAll fails.
   */
  constructor(
    private readonly rt: Runtime,
    readonly devices: readonly number[],
    private readonly lib: NcclLibrary = loadNccl(rt.backend.name, rt.backend.installRoot),
  ) {
    if (!rt.backend.capabilities.vendorCollectives)
      throw new GpuError(ErrorCode.UNSUPPORTED, `NCCL and RCCL need the cuda or hip backend, not ${rt.backend.name}`);
    if (devices.length < 1) throw new GpuError(ErrorCode.INVALID_ARGUMENT, 'a communicator needs at least one device');
    if (new Set(devices).size !== devices.length) throw new GpuError(ErrorCode.INVALID_ARGUMENT, 'a device may be one rank only');
    for (const d of devices) rt.device(d);
    this.library = lib.library;
    this.version = lib.version;
    const out = Buffer.alloc(8 * devices.length);
    this.check(lib.fn.ncclCommInitAll!(out, devices.length, Int32Array.from(devices)) as number, 'ncclCommInitAll');
    this.comms = devices.map((_, i) => Number(out.readBigUInt64LE(8 * i)));
    this.streams = devices.map((d) => rt.device(d).createStream({ nonBlocking: true }));
  }

  /** Enqueues the collective on every rank's stream, grouped. */
  run(call: CollectiveCall): void {
    if (this.disposed) throw new GpuError(ErrorCode.DISPOSED, 'this communicator was disposed');
    checkCall(call, this.devices, true);
    const f = this.lib.fn;
    const n = this.devices.length;
    const dt = NCCL_DTYPE[call.dtype];
    const op = NCCL_OP[call.reduction ?? 'sum'];
    const c = call.count;
    const esize = call.dtype === 'float64' ? 8 : call.dtype === 'int8' || call.dtype === 'uint8' ? 1 : 4;
    const ptr = (r: number, which: 'send' | 'recv'): number => {
      const a = (which === 'send' ? call.send : call.recv)[r]!;
      return a.device !== undefined ? a.address : a.deviceAddress!;
    };
    this.check(f.ncclGroupStart!() as number, 'ncclGroupStart');
    let status = 0;
    let what = '';
    try {
      for (let r = 0; r < n && status === 0; r++) {
        const comm = this.comms[r]!;
        const s = this.streams[r]!.handle;
        switch (call.op) {
          case 'all-reduce':
            what = 'ncclAllReduce';
            status = f.ncclAllReduce!(ptr(r, 'send'), ptr(r, 'recv'), c, dt, op, comm, s) as number;
            break;
          case 'all-gather':
            what = 'ncclAllGather';
            status = f.ncclAllGather!(ptr(r, 'send'), ptr(r, 'recv'), c, dt, comm, s) as number;
            break;
          case 'reduce-scatter':
            what = 'ncclReduceScatter';
            status = f.ncclReduceScatter!(ptr(r, 'send'), ptr(r, 'recv'), c, dt, op, comm, s) as number;
            break;
          case 'broadcast':
            what = 'ncclBroadcast';
            status = f.ncclBroadcast!(ptr(r, 'send'), ptr(r, 'recv'), c, dt, call.root ?? 0, comm, s) as number;
            break;
          case 'all-to-all':
            // grouped sends and receives, chunk j of rank r to rank j (as nccl-tests' alltoall)
            what = 'ncclSend/ncclRecv';
            for (let j = 0; j < n && status === 0; j++) {
              status = f.ncclSend!(ptr(r, 'send') + j * c * esize, c, dt, j, comm, s) as number;
              if (status === 0) status = f.ncclRecv!(ptr(r, 'recv') + j * c * esize, c, dt, j, comm, s) as number;
            }
            break;
          case 'send-recv':
            what = 'ncclSend/ncclRecv';
            status = f.ncclSend!(ptr(r, 'send'), c, dt, (r + 1) % n, comm, s) as number;
            if (status === 0) status = f.ncclRecv!(ptr(r, 'recv'), c, dt, (r + n - 1) % n, comm, s) as number;
            break;
        }
      }
    } finally {
      const end = f.ncclGroupEnd!() as number;
      if (status === 0) {
        status = end;
        what = 'ncclGroupEnd';
      }
    }
    this.check(status, what);
  }

  synchronize(): void {
    for (const s of this.streams) s.synchronize();
  }

  /**
   * One buffer of `bytes` per rank, on the rank's device, from ncclMemAlloc and registered with the rank's
   * communicator. Free them (or let the communicator's disposal do it) before the runtime closes.
   * @throws InvalidArgumentError for a bad size; GpuError UNSUPPORTED where the library lacks ncclMemAlloc or
   * ncclCommRegister (NCCL before 2.19), NATIVE where a call fails (nothing stays allocated then).
   */
  allocRegistered(bytes: number): NcclBuffer[] {
    if (this.disposed) throw new GpuError(ErrorCode.DISPOSED, 'this communicator was disposed');
    checkSize(bytes, 'registered buffer');
    const f = this.lib.fn;
    if (!f.ncclMemAlloc || !f.ncclMemFree || !f.ncclCommRegister || !f.ncclCommDeregister)
      throw new GpuError(ErrorCode.UNSUPPORTED, `${this.library} ${this.version} has no ncclMemAlloc / ncclCommRegister (NCCL 2.19 and later have them)`);
    const out: NcclBuffer[] = [];
    try {
      this.devices.forEach((device, r) => {
        const comm = this.comms[r]!;
        this.rt.backend.useDevice(device);
        const ptr = [0];
        this.check(f.ncclMemAlloc!(ptr, bytes) as number, `ncclMemAlloc(${bytes}) on device ${device}`);
        const handle = [0];
        const status = f.ncclCommRegister!(comm, ptr[0]!, bytes, handle) as number;
        if (status !== 0) {
          f.ncclMemFree!(ptr[0]!);
          this.check(status, `ncclCommRegister on device ${device}`);
        }
        const buffer: NcclBuffer = new NcclBuffer(this.rt, ptr[0]!, bytes, device, () => {
          this.buffers.delete(buffer);
          this.rt.backend.useDevice(device);
          const dereg = f.ncclCommDeregister!(comm, handle[0]!) as number;
          const freed = f.ncclMemFree!(ptr[0]!) as number;
          this.check(dereg, 'ncclCommDeregister');
          this.check(freed, 'ncclMemFree');
        });
        this.buffers.add(buffer);
        out.push(this.rt.adopt(buffer));
      });
    } catch (e) {
      for (const b of out) b.free();
      throw e;
    }
    return out;
  }

  /** Each rank's stream: the collectives run there, in order. */
  get rankStreams(): readonly Stream[] {
    return this.streams;
  }

  private check(status: number, what: string): void {
    if (status === 0) return;
    const text = (this.lib.fn.ncclGetErrorString?.(status) as string | undefined) ?? 'unknown';
    throw new GpuError(ErrorCode.NATIVE, `${what}: ${this.library} error ${status} (${text})`, { status, statusName: text });
  }

  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of this.streams) {
      s.synchronize();
      s[Symbol.dispose]();
    }
    // registered buffers must be deregistered while their communicator lives
    for (const b of [...this.buffers]) if (!b.disposed) b.free();
    for (const c of this.comms) this.lib.fn.ncclCommDestroy!(c);
  }
}

/** A communicator for the runtime's devices: NCCL or RCCL on GPU backends, staged through the host otherwise. */
export async function openCommunicator(rt: Runtime, devices: readonly number[], library: 'auto' | 'nccl' | 'staged' = 'auto'): Promise<Communicator> {
  const { StagedCommunicator } = await import('./staged.js');
  if (library === 'staged' || (library === 'auto' && !rt.backend.capabilities.vendorCollectives)) return new StagedCommunicator(rt, devices);
  return new NcclCommunicator(rt, devices);
}
