/**
 * XNACK as the ROCm runtime decides it. HSA_XNACK, read once when the runtime starts, sets the process's XNACK mode
 * on GPUs that have one; the runtime then reports it two ways: the target ID in gcnArchName carries `xnack+` or
 * `xnack-` (targets without an XNACK setting carry neither), and hipDeviceAttributePageableMemoryAccess is HSA's
 * SVM_ACCESSIBLE_BY_DEFAULT, which holds when XNACK is on (ROCm/clr rocclr/device/rocm/rocdevice.cpp, "This capability
 * should be available with xnack enabled"; hipamd/src/hip_device.cpp sets pageableMemoryAccess from it). CUDA's
 * signal, concurrentManagedAccess, says on AMD only that the kernel driver supports shared virtual memory (HMM).
 */
import type { XnackState } from '../backend.js';

/**
 * The XNACK state of a device: the runtime's own answer (pageable memory access) where it gives one, else the target
 * ID's suffix, where the target has one; `env` is what HSA_XNACK asks for, shown beside the decision.
 */
export function xnackDecision(
  archName: string | undefined,
  pageableMemoryAccess: boolean | undefined,
  env: string | undefined = process.env.HSA_XNACK,
): XnackState {
  const out: XnackState = {};
  if (archName?.includes(':xnack+')) out.arch = true;
  else if (archName?.includes(':xnack-')) out.arch = false;
  if (env !== undefined) out.env = env;
  if (pageableMemoryAccess !== undefined) {
    out.enabled = pageableMemoryAccess;
    out.source = 'runtime';
  } else if (out.arch !== undefined) {
    out.enabled = out.arch;
    out.source = 'arch';
  } else if (archName !== undefined) {
    // A target with no XNACK setting (gfx1100, gfx1030, ...) never retries a faulting access.
    out.enabled = false;
    out.source = 'arch';
  }
  return out;
}
