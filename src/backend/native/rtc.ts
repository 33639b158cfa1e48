/**
 * Run-time compilation with nvrtc or hiprtc: the two share one flow (create, compile, read the log, read the
 * binary, destroy), driven here through the functions the vendor's ffi.ts declared. Results are cached on disk.
 */
import { ErrorCode, GpuError } from '../../errors.js';
import type { CompiledModule, KernelSource } from '../backend.js';
import { cacheKey, readCached, writeCached } from '../compile-cache.js';
import type { NativeFn } from './ffi.js';

/** A loaded run-time compiler. */
export interface RtcCompiler {
  backend: 'cuda' | 'hip';
  /** Compiler name and version, part of the cache key: "nvrtc 13.0". */
  version: string;
  fns: Record<string, NativeFn>;
  /** Names (in `fns`) of the calls that return the binary's size and bytes. */
  codeSize: string;
  code: string;
  /** File extension of cached binaries. */
  ext: string;
}

/**
 * Compiles `source` for `arch` with `options`, or reads the binary from the on-disk cache.
 * @throws GpuError COMPILE_FAILED with the compiler's log.
 */
export function compileSource(rtc: RtcCompiler, source: KernelSource, arch: string, options: readonly string[]): CompiledModule {
  const key = cacheKey([rtc.backend, rtc.version, arch, ...options, source.source]);
  const hit = readCached(key, rtc.ext);
  if (hit) return { image: hit, cached: true };
  const t0 = performance.now();
  const f = rtc.fns;
  const prog = [0];
  const fail = (status: number, call: string, log?: string): GpuError =>
    new GpuError(
      ErrorCode.COMPILE_FAILED,
      `${call} failed for ${source.name} (${arch}): ${(f.GetErrorString!(status) as string) ?? status}${log ? `\n${log}` : ''}`,
      {
        backend: rtc.backend,
        status,
      },
    );
  let status = f.CreateProgram!(prog, source.source, `${source.name}.cu`, 0, null, null) as number;
  if (status !== 0) throw fail(status, 'CreateProgram');
  try {
    status = f.CompileProgram!(prog[0], options.length, options) as number;
    const logSize = [0];
    let log = '';
    if ((f.GetProgramLogSize!(prog[0], logSize) as number) === 0 && logSize[0]! > 1) {
      const buf = Buffer.alloc(logSize[0]!);
      f.GetProgramLog!(prog[0], buf);
      log = buf.toString('utf8', 0, Math.max(0, buf.indexOf(0) < 0 ? buf.length : buf.indexOf(0))).trim();
    }
    if (status !== 0) throw fail(status, 'CompileProgram', log);
    const size = [0];
    status = f[rtc.codeSize]!(prog[0], size) as number;
    if (status !== 0) throw fail(status, rtc.codeSize);
    const image = Buffer.alloc(size[0]!);
    status = f[rtc.code]!(prog[0], image) as number;
    if (status !== 0) throw fail(status, rtc.code);
    const bytes = new Uint8Array(image.buffer, image.byteOffset, image.byteLength);
    writeCached(key, rtc.ext, bytes);
    return { image: bytes, cached: false, compileMs: performance.now() - t0, log: log || undefined };
  } finally {
    f.DestroyProgram!(prog);
  }
}
