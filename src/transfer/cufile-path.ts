/**
 * uploadFile / downloadFile through cuFile (GPUDirect Storage): the file's bytes go between storage and device memory
 * without the pinned ring. Taken by `auto` only where the nvidia-fs kernel driver is loaded (real GPUDirect); asked
 * for with `path: 'cufile'` it also runs in cuFile's compatibility mode (POSIX reads through cuFile's own bounce
 * buffers). cuFile's calls are synchronous and need the device's context current on the calling thread, which the
 * JS thread has: the range goes in slices of 64 MiB with a turn of the event loop between them, so an abort is seen.
 */
import { existsSync } from 'node:fs';
import { ErrorCode, GpuError } from '../errors.js';
import { loadCuFile } from '../backend/cufile/ffi.js';
import type { Allocation } from '../memory/allocation.js';
import { aborted } from './flow.js';

const SLICE = 64 * 2 ** 20;

/** Why cuFile cannot serve this transfer, or undefined when it can be tried. */
export function cufileUnavailable(backend: string, dst: Allocation, auto: boolean): string | undefined {
  if (backend !== 'cuda') return `cuFile is NVIDIA's (the ${backend} backend has none)`;
  if (dst.kind !== 'device') return `cuFile moves files to and from device memory, not ${dst.kind} memory`;
  if (auto && !existsSync('/sys/module/nvidia_fs')) return 'no nvidia-fs driver: cuFile would only run in compatibility mode';
  const cf = loadCuFile();
  return 'error' in cf ? cf.error : undefined;
}

/** Moves `bytes` between the file at `fileOffset` and device memory `dst` at `devOffset` through cuFile. */
export async function cufileTransfer(
  direction: 'upload' | 'download',
  fd: number,
  dst: Allocation,
  devOffset: number,
  fileOffset: number,
  bytes: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const cf = loadCuFile();
  if ('error' in cf) throw new GpuError(ErrorCode.UNSUPPORTED, cf.error);
  const reg = cf.register(fd);
  if ('error' in reg) throw new GpuError(ErrorCode.IO_ERROR, `cuFileHandleRegister failed (CUfileOpError ${reg.error})`, { status: reg.error });
  try {
    for (let done = 0; done < bytes; ) {
      if (signal?.aborted) throw aborted();
      const n = Math.min(SLICE, bytes - done);
      const r =
        direction === 'upload'
          ? cf.read(reg.handle, dst.address, n, fileOffset + done, devOffset + done)
          : cf.write(reg.handle, dst.address, n, fileOffset + done, devOffset + done);
      if (r < 0)
        throw new GpuError(ErrorCode.IO_ERROR, `cuFile${direction === 'upload' ? 'Read' : 'Write'} failed at byte ${fileOffset + done} (${r})`, { status: r });
      if (r === 0)
        throw new GpuError(ErrorCode.IO_ERROR, `the file ended at byte ${fileOffset + done}, before the ${bytes} bytes asked`, { statusName: 'EOF' });
      done += r;
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    cf.deregister(reg.handle);
  }
}
