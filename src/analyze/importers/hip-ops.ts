/**
 * What HIP names the operations it puts on a GPU, as legacy rocprof (v1) and rocprofv2 record them: HIP's command
 * names (clr's getOclCommandKindString, which roctracer's hipGetCmdName returns: KernelExecution, CopyHostToDevice,
 * CopyDeviceToHost2D, FillBuffer, Marker, ..., and "Unknown command type" for a command it has no name for), or a
 * kernel's own name where the profiler patched it in from the launch. Copies and fills are memory work; markers and
 * barriers order a queue; the other commands (image and SVM commands, maps, unnamed commands, which take no time in
 * the traces seen) are neither kernels nor copies, and are left out of both.
 */

export type HipOpKind = 'kernel' | 'copy' | 'fill' | 'barrier' | 'other';

/** HIP's names of commands that are neither a kernel, a copy nor a fill. */
const OTHER_COMMANDS =
  /^(Unknown command type|InternalMarker|Task|NativeKernel|ReadImage|WriteImage|CopyImage|CopyImageToBuffer|CopyBufferToImage|MapBuffer|MapImage|UnmapMemObject|MigrateMemObjects|AcquireGLObjects|ReleaseGLObjects|User|SvmFree|SvmMap|SvmUnmap|PerfCounter|ThreadTrace|SignalSemaphore|WaitSemaphore|ExternalSemaphore)$/;

/** What an operation named `name` is (quotes and rocprof's " [clone .kd]" suffix aside). */
export function hipOpKind(name: string): HipOpKind {
  const n = name.replace(/^"(.*)"$/, '$1').trim();
  if (/^(Fill(Buffer|Image)|SvmMemFill)/.test(n)) return 'fill';
  if (/^(Copy(Host|Device)To(Host|Device)\w*|CopyBuffer(Rect)?|SvmMemcpy)$/.test(n)) return 'copy';
  if (/^(Marker\w*|<barrier packet>|BARRIER|Barrier)$/.test(n)) return 'barrier';
  if (OTHER_COMMANDS.test(n)) return 'other';
  return 'kernel';
}
