/**
 * cuFile (GPUDirect Storage, libcufile) bound through koffi, from cufile.h's published API: the driver opened once,
 * file descriptors registered as handles, synchronous reads and writes between a file and device memory.
 *
 *   CUfileError_t cuFileDriverOpen(void);               CUfileError_t = { CUfileOpError err; CUresult cu_err; }
 *   CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
 *   void          cuFileHandleDeregister(CUfileHandle_t fh);
 *   ssize_t       cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset);
 *   ssize_t       cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset);
 *   CUfileDescr_t = { CUfileFileHandleType type; union { int fd; void *handle; } handle; const CUfileFSOps_t *fs_ops; }
 *                   (type 1 = CU_FILE_HANDLE_TYPE_OPAQUE_FD)
 *
 * A read answers the bytes read, or -1 with errno set, or a negative CUfileOpError. Without the nvidia-fs kernel
 * driver cuFile runs in compatibility mode (POSIX reads through its own bounce buffers): `gdsDriver` says which.
 */
import { existsSync } from 'node:fs';
import type { LibraryHandle } from 'koffi';
import { koffiModule } from '../native/ffi.js';

/** The bound library, or why it could not be bound. */
export interface CuFile {
  readonly library: string;
  /** True when the nvidia-fs kernel driver is loaded: reads go from storage to the GPU without the host. */
  readonly gdsDriver: boolean;
  /** Registers an open descriptor (O_DIRECT recommended); answers a handle number, or the error's code. */
  register(fd: number): { handle: number } | { error: number };
  deregister(handle: number): void;
  /** Bytes read into device memory at `dev` + `devOffset` (negative: an error code; -1 with errno). */
  read(handle: number, dev: number, bytes: number, fileOffset: number, devOffset: number): number;
  write(handle: number, dev: number, bytes: number, fileOffset: number, devOffset: number): number;
}

let bound: CuFile | { error: string } | undefined;

/** libcufile, opened once per process; `{ error }` where it is not installed or its driver does not open. */
export function loadCuFile(): CuFile | { error: string } {
  if (bound) return bound;
  const koffi = koffiModule();
  let lib: LibraryHandle | undefined;
  let name = '';
  const tried: string[] = [];
  for (const candidate of [process.env.GPUMEM_CUFILE_PATH, 'libcufile.so.0', 'libcufile.so', '/usr/local/cuda/lib64/libcufile.so.0'].filter(
    (x): x is string => !!x,
  )) {
    try {
      lib = koffi.load(candidate);
      name = candidate;
      break;
    } catch (e) {
      tried.push(`${candidate}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  if (!lib) {
    bound = { error: `libcufile is not installed (set GPUMEM_CUFILE_PATH to it). Tried: ${tried.join('; ')}` };
    return bound;
  }
  const Err = koffi.struct('GpumemCUfileError', { err: 'int', cu_err: 'int' });
  // The handle union sits at 8 (after the enum and its padding); its 8 bytes hold the fd in the first 4.
  const Descr = koffi.struct('GpumemCUfileDescr', { type: 'int', pad0: 'int', fd: 'int', pad1: 'int', fs_ops: 'void *' });
  if (koffi.sizeof(Descr) !== 24 || koffi.offsetof(Descr, 'fd') !== 8 || koffi.offsetof(Descr, 'fs_ops') !== 16 || koffi.sizeof(Err) !== 8) {
    bound = { error: 'koffi does not lay CUfileDescr_t out as cufile.h does (24 bytes, the handle union at 8)' };
    return bound;
  }
  try {
    const driverOpen = lib.func('GpumemCUfileError cuFileDriverOpen()');
    const handleRegister = lib.func('GpumemCUfileError cuFileHandleRegister(_Out_ void **fh, GpumemCUfileDescr *descr)');
    const handleDeregister = lib.func('void cuFileHandleDeregister(void *fh)');
    const read = lib.func('long cuFileRead(void *fh, uintptr_t buf, size_t size, int64_t fileOffset, int64_t bufOffset)');
    const write = lib.func('long cuFileWrite(void *fh, uintptr_t buf, size_t size, int64_t fileOffset, int64_t bufOffset)');
    const opened = driverOpen() as { err: number; cu_err: number };
    if (opened.err !== 0) {
      bound = { error: `cuFileDriverOpen failed (CUfileOpError ${opened.err}, CUresult ${opened.cu_err})` };
      return bound;
    }
    // Handles stay here (koffi pointers never leave backend/): the caller holds numbers.
    const handles = new Map<number, unknown>();
    let next = 1;
    const of = (h: number): unknown => {
      const p = handles.get(h);
      if (p === undefined) throw new Error(`cuFile: no handle ${h}`);
      return p;
    };
    bound = {
      library: name,
      gdsDriver: existsSync('/sys/module/nvidia_fs') || existsSync('/proc/driver/nvidia-fs'),
      register: (fd) => {
        const out: unknown[] = [null];
        const r = handleRegister(out, { type: 1, pad0: 0, fd, pad1: 0, fs_ops: null }) as { err: number };
        if (r.err !== 0) return { error: r.err };
        const h = next++;
        handles.set(h, out[0]);
        return { handle: h };
      },
      deregister: (h) => {
        const p = handles.get(h);
        handles.delete(h);
        if (p !== undefined) handleDeregister(p);
      },
      read: (h, dev, bytes, off, devOff) => read(of(h), dev, bytes, off, devOff) as number,
      write: (h, dev, bytes, off, devOff) => write(of(h), dev, bytes, off, devOff) as number,
    };
  } catch (e) {
    bound = { error: `libcufile lacks the cuFile calls: ${(e as Error).message}` };
  }
  return bound;
}
