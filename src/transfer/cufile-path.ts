/**
 * uploadFile / downloadFile through cuFile (GPUDirect Storage): the file's bytes go between storage and device memory
 * without the pinned ring. Taken by `auto` only where the nvidia-fs kernel driver is loaded (real GPUDirect); asked
 * for with `path: 'cufile'` it also runs in cuFile's compatibility mode (POSIX reads through cuFile's own bounce
 * buffers) where that mode is on. A file cuFile refuses to register goes through the ring, the refusal said in the
 * result's `fallback`. cuFile's calls are synchronous and need the device's context current on the calling thread, which the
 * JS thread has: the range goes in slices of 64 MiB with a turn of the event loop between them, so an abort is seen.
 */
import { existsSync } from 'node:fs';
import { ErrorCode, GpuError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import { loadCuFile } from '../backend/cufile/ffi.js';
import type { Allocation } from '../memory/allocation.js';
import { aborted } from './flow.js';

const SLICE = 64 * 2 ** 20;

/** Why cuFile cannot serve this transfer, or undefined when it can be tried. */
export function cufileUnavailable(backend: Backend, dst: Allocation, auto: boolean): string | undefined {
  if (!backend.capabilities.gpuDirectStorage) return `cuFile is NVIDIA's (the ${backend.name} backend has none)`;
  if (dst.kind !== 'device') return `cuFile moves files to and from device memory, not ${dst.kind} memory`;
  if (auto && !existsSync('/sys/module/nvidia_fs')) return 'no nvidia-fs driver: cuFile would only run in compatibility mode';
  const cf = loadCuFile();
  return 'error' in cf ? cf.error : undefined;
}

/** A file registered with cuFile: moves ranges between it and device memory, then `close()` deregisters it. */
export interface CufileHandle {
  transfer(
    direction: 'upload' | 'download',
    dst: Allocation,
    devOffset: number,
    fileOffset: number,
    bytes: number,
    signal: AbortSignal | undefined,
  ): Promise<void>;
  close(): void;
}

/**
 * Registers the open file `fd` with cuFile, or answers why it could not (cuFileHandleRegister's status: without
 * nvidia-fs and with cuFile's compatibility mode off, a registration is refused, 5027 on the H200 machines).
 */
export function cufileRegister(fd: number): CufileHandle | { error: string } {
  const cf = loadCuFile();
  if ('error' in cf) return { error: cf.error };
  const reg = cf.register(fd);
  if ('error' in reg) return { error: `cuFileHandleRegister refused the file (CUfileOpError ${reg.error})` };
  let open = true;
  return {
    close: () => {
      if (open) cf.deregister(reg.handle);
      open = false;
    },
    transfer: async (direction, dst, devOffset, fileOffset, bytes, signal) => {
      for (let done = 0; done < bytes; ) {
        if (signal?.aborted) throw aborted();
        const n = Math.min(SLICE, bytes - done);
        const r =
          direction === 'upload'
            ? cf.read(reg.handle, dst.address, n, fileOffset + done, devOffset + done)
            : cf.write(reg.handle, dst.address, n, fileOffset + done, devOffset + done);
        if (r < 0)
          throw new GpuError(ErrorCode.IO_ERROR, `cuFile${direction === 'upload' ? 'Read' : 'Write'} failed at byte ${fileOffset + done} (${r})`, {
            status: r,
          });
        if (r === 0)
          throw new GpuError(ErrorCode.IO_ERROR, `the file ended at byte ${fileOffset + done}, before the ${bytes} bytes asked`, { statusName: 'EOF' });
        done += r;
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}
