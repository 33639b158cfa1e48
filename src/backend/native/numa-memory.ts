/**
 * Host memory placed on one NUMA node, for pinned staging buffers near the GPU they feed: an anonymous mapping bound
 * to the node with mbind (MPOL_BIND), its pages faulted in there, then page-locked by the runtime (hostRegister).
 * On a machine with one node this is plain pinned memory, and gpumem does not use it there.
 */
import { ErrorCode, GpuError, OutOfMemoryError } from '../../errors.js';
import { libcMemory } from './ffi.js';

/** set_mempolicy modes (linux/mempolicy.h). */
const MPOL_PREFERRED = 1;

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

/**
 * Runs `allocate` with the calling thread's memory policy set to prefer `node`, then puts the thread's policy back as
 * it was: for runtimes that place memory as the caller's policy says (hipHostMallocNumaUser follows the calling
 * thread's policy, ROCm/clr rocclr/device/rocm/rocdevice.cpp hostNumaAlloc: get_mempolicy, then the first node of an
 * MPOL_BIND or MPOL_PREFERRED mask). Answers what `allocate` answered and the node its page at `address(result)` is
 * on, where the kernel says.
 * @throws GpuError UNSUPPORTED where the policy calls are not known or refused; what `allocate` throws.
 */
export function allocateUnderPolicy<T>(
  node: number,
  backend: string,
  allocate: () => T,
  address: (r: T) => number,
): { result: T; placedOn: number | undefined } {
  const libc = libcMemory();
  const saved = libc?.getPolicy();
  if (!libc || !saved) throw new GpuError(ErrorCode.UNSUPPORTED, `NUMA placement: this thread's memory policy cannot be read on ${process.arch}`, { backend });
  if (node >= 64) throw new GpuError(ErrorCode.UNSUPPORTED, `NUMA placement: node ${node} is beyond the 64 nodes gpumem sets a policy for`, { backend });
  const err = libc.setPolicy(MPOL_PREFERRED, 1n << BigInt(node));
  if (err !== 0) throw new GpuError(ErrorCode.NATIVE, `set_mempolicy(MPOL_PREFERRED, node ${node}) failed (errno ${err})`, { backend, status: err });
  let result: T;
  try {
    result = allocate();
  } finally {
    libc.setPolicy(saved.mode, saved.mask);
  }
  return { result, placedOn: libc.nodeOf(address(result)) };
}
