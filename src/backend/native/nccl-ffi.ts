/**
 * NCCL (NVIDIA) and RCCL (AMD, the same API) bound with koffi for collectives/: the functions as nccl.h declares them,
 * loaded from the vendor install (RCCL from the ROCm install HIP came from first). What leaves this file is plain
 * JavaScript functions over numbers, never koffi's function objects.
 */
import { BackendUnavailableError } from '../../errors.js';
import { cudaLibraryDirs, rocmLibraryDirs, type LibrarySpec } from '../library-search.js';
import { declare, loadLibrary } from './ffi.js';

/** The functions bound, as nccl.h declares them (types spelled as koffi takes them). */
export const NCCL_PROTOTYPES = [
  'int ncclGetVersion(_Out_ int *version)',
  'const char *ncclGetErrorString(int result)',
  'int ncclCommInitAll(void *comms, int ndev, const int *devlist)',
  'int ncclCommDestroy(uintptr_t comm)',
  'int ncclGroupStart()',
  'int ncclGroupEnd()',
  'int ncclAllReduce(uintptr_t sendbuff, uintptr_t recvbuff, size_t count, int datatype, int op, uintptr_t comm, uintptr_t stream)',
  'int ncclAllGather(uintptr_t sendbuff, uintptr_t recvbuff, size_t sendcount, int datatype, uintptr_t comm, uintptr_t stream)',
  'int ncclReduceScatter(uintptr_t sendbuff, uintptr_t recvbuff, size_t recvcount, int datatype, int op, uintptr_t comm, uintptr_t stream)',
  'int ncclBroadcast(uintptr_t sendbuff, uintptr_t recvbuff, size_t count, int datatype, int root, uintptr_t comm, uintptr_t stream)',
  'int ncclSend(uintptr_t sendbuff, size_t count, int datatype, int peer, uintptr_t comm, uintptr_t stream)',
  'int ncclRecv(uintptr_t recvbuff, size_t count, int datatype, int peer, uintptr_t comm, uintptr_t stream)',
  // NCCL 2.19 and later: memory NCCL allocates for itself, and buffers registered with a communicator
  'int ncclMemAlloc(_Out_ uintptr_t *ptr, size_t size)',
  'int ncclMemFree(uintptr_t ptr)',
  'int ncclCommRegister(uintptr_t comm, uintptr_t buff, size_t size, _Out_ uintptr_t *handle)',
  'int ncclCommDeregister(uintptr_t comm, uintptr_t handle)',
];

/** A bound NCCL function: plain JavaScript over numbers and typed arrays, answering the status (or a string). */
export type NcclFn = (...args: unknown[]) => unknown;

export interface NcclLibrary {
  library: 'nccl' | 'rccl';
  /** The functions the library has, by their nccl.h names. */
  fn: Record<string, NcclFn>;
  path: string | undefined;
  /** "2.28.3", from ncclGetVersion. */
  version: string;
}

/**
 * Where NCCL or RCCL is looked for: RCCL in the ROCm install HIP came from (`installRoot`) before any other, so that
 * collectives and the runtime come from one release; NCCL in the system's, the CUDA toolkit's and pip's places.
 */
export function ncclSpec(backend: string, installRoot?: string | undefined): LibrarySpec {
  if (backend !== 'hip') return { envVar: 'GPUMEM_LIBNCCL', names: ['libnccl.so.2', 'libnccl.so'], dirs: cudaLibraryDirs('nccl') };
  const own = installRoot ? [`${installRoot}/lib`, `${installRoot}/lib64`] : [];
  return { envVar: 'GPUMEM_LIBRCCL', names: ['librccl.so.1', 'librccl.so'], dirs: [...own, ...rocmLibraryDirs()], order: 'dirs-first' };
}

/**
 * Loads NCCL for the cuda backend (GPUMEM_LIBNCCL, the system's, the CUDA toolkit's, pip's nvidia-nccl wheel) or
 * RCCL for hip (GPUMEM_LIBRCCL, the ROCm install HIP came from, then the others).
 * @throws BackendUnavailableError naming the files tried and the variable that sets the path.
 */
export function loadNccl(backend: string, installRoot?: string | undefined): NcclLibrary {
  const amd = backend === 'hip';
  const loaded = loadLibrary(ncclSpec(backend, installRoot), 'collectives', backend);
  const bound = declare(loaded.lib, NCCL_PROTOTYPES);
  const fn: Record<string, NcclFn> = {};
  for (const [name, f] of Object.entries(bound)) fn[name] = (...args: unknown[]): unknown => f(...args);
  if (!fn.ncclCommInitAll || !fn.ncclGroupStart || !fn.ncclAllReduce)
    throw new BackendUnavailableError(
      `${loaded.record.path ?? loaded.record.name} does not export ncclCommInitAll, ncclGroupStart and ncclAllReduce: not NCCL or RCCL`,
    );
  const v = [0];
  fn.ncclGetVersion?.(v);
  // NCCL_VERSION_CODE: major * 1000 + minor * 100 + patch up to 2.8, major * 10000 + minor * 100 + patch after
  const n = v[0]!;
  const version =
    n >= 10000 ? `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}` : `${Math.floor(n / 1000)}.${Math.floor(n / 100) % 10}.${n % 100}`;
  return { library: amd ? 'rccl' : 'nccl', fn, path: loaded.record.path, version };
}
