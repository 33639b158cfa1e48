/**
 * The environment variables that give the exact path of a vendor library, one row each: the CLI's help prints this
 * list, and a test checks that every variable a backend's loader reads is in it.
 */

/** One override: the variable and the library it names. */
export interface LibraryEnv {
  readonly envVar: string;
  readonly library: string;
}

export const LIBRARY_ENV: readonly LibraryEnv[] = [
  { envVar: 'GPUMEM_LIBCUDART', library: 'libcudart, the CUDA runtime (cuda)' },
  { envVar: 'GPUMEM_LIBCUDA', library: 'libcuda, the CUDA driver (cuda)' },
  { envVar: 'GPUMEM_LIBNVRTC', library: 'libnvrtc, the kernel compiler (cuda)' },
  { envVar: 'GPUMEM_LIBNVML', library: 'libnvidia-ml, for monitor and info (cuda)' },
  { envVar: 'GPUMEM_LIBNCCL', library: 'libnccl, for collectives (cuda)' },
  { envVar: 'GPUMEM_LIBAMDHIP64', library: 'libamdhip64, the HIP runtime (hip)' },
  { envVar: 'GPUMEM_LIBHIPRTC', library: 'libhiprtc, the kernel compiler (hip)' },
  { envVar: 'GPUMEM_LIBAMD_SMI', library: 'libamd_smi, for monitor and info, ROCm 6.1+ (hip)' },
  { envVar: 'GPUMEM_LIBROCM_SMI', library: 'librocm_smi64, before AMD SMI and as its fallback (hip)' },
  { envVar: 'GPUMEM_LIBRCCL', library: 'librccl, for collectives (hip)' },
];
