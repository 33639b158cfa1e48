/**
 * Host memory placed on one NUMA node, for pinned staging buffers near the GPU they feed: an anonymous mapping bound
 * to the node with mbind (MPOL_BIND), its pages faulted in there, then page-locked by the runtime (hostRegister).
 * On a machine with one node this is plain pinned memory, and gpumem does not use it there.
 */
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import { libcMemory } from './ffi.js';

/** Maps `bytes` on `node`; answers the address, to register and later {@link unmapNodeMemory}. */
export function mapOnNode(bytes: number, node: number, backend: string): number {
  const libc = libcMemory();
  if (!libc) throw new GpuError(ErrorCode.UNSUPPORTED, `NUMA placement: mbind is not known on ${process.arch}`, { backend });
  const address = libc.mmap(bytes);
  if (address === 0)
    throw new OutOfMemoryError(`out of memory: mmap of ${bytes} bytes for NUMA-placed staging memory failed`, { requestedBytes: bytes }, { backend });
  const err = libc.mbind(address, bytes, node);
  if (err !== 0) {
    libc.munmap(address, bytes);
    throw new GpuError(ErrorCode.NATIVE, `mbind of ${bytes} bytes to NUMA node ${node} failed (errno ${err})`, { backend, status: err });
  }
  // Fault every page in now, on the node the policy names, before the runtime pins them.
  libc.memset(address, 0, bytes);
  return address;
}

export function unmapNodeMemory(address: number, bytes: number): void {
  libcMemory()?.munmap(address, bytes);
}
