/**
 * Fake ROCm install trees for tests: libamdhip64, libamd_smi and librocm_smi64 compiled with gcc from fake-hip.c and
 * fake-smi.c (C written for gpumem) as each release answers, laid out as /opt/rocm-X.Y.Z/lib is. Nothing here is a
 * GPU: the libraries exist so that gpumem's per-release decisions run against a library that loads for real.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A ROCm release as the fake libraries answer for it. */
export interface FakeRelease {
  major: number;
  minor: number;
  /** The libamdhip64 soname's major (ROCm 5: 5, 6: 6, 7: 7). */
  so?: number;
  /** hipMemcpyBatchAsync exported (7.1 and later) and its form. */
  batch?: { failIndex: boolean; attributes: boolean; refuseAll?: boolean } | undefined;
  /** Ship libamd_smi (6.1 and later), with amdsmi_get_gpu_enumeration_info (6.4 and later). */
  amdSmi?: { enumeration: boolean } | undefined;
  /** Ship librocm_smi64. */
  rocmSmi?: boolean;
  /** Ship include/hip/hip_runtime_api.h declaring hipMemcpyBatchAsync with or without failIdx. */
  header?: { failIndex: boolean } | undefined;
}

/** The releases the issue names, as their libraries behave. */
export const RELEASES: Record<string, FakeRelease> = {
  '5.2': { major: 5, minor: 2, rocmSmi: true },
  '5.3': { major: 5, minor: 3, rocmSmi: true },
  '5.5': { major: 5, minor: 5, rocmSmi: true },
  '6.1': { major: 6, minor: 1, amdSmi: { enumeration: false }, rocmSmi: true },
  '7.0': { major: 7, minor: 0, amdSmi: { enumeration: true }, rocmSmi: true },
  '7.1': { major: 7, minor: 1, batch: { failIndex: true, attributes: false }, amdSmi: { enumeration: true }, rocmSmi: true },
};

const sourceDir = fileURLToPath(new URL('../../../../src/backend/hip/fake/', import.meta.url));

/** True when a C compiler is on the path (CI installs g++, which brings gcc). */
export function haveCompiler(): boolean {
  try {
    execFileSync('cc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Variables a fake install is used through (GPUMEM_LIBAMDHIP64 among them) and those it must not inherit. */
const CLEARED = ['GPUMEM_LIBROCM_SMI', 'GPUMEM_LIBAMD_SMI', 'GPUMEM_LIBHIPRTC', 'GPUMEM_BACKEND'];

/**
 * Points the process at a fake install: sets `vars` (GPUMEM_LIBAMDHIP64 and the fake's own), clears the variables
 * that would load other libraries, and answers a function that puts the environment back as it was.
 */
export function useFakeEnvironment(vars: Record<string, string>): () => void {
  const saved = new Map<string, string | undefined>();
  for (const k of [...CLEARED, ...Object.keys(vars)]) saved.set(k, process.env[k]);
  for (const k of CLEARED) delete process.env[k];
  Object.assign(process.env, vars);
  return () => {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

/** A temporary folder of fake installs, removed by `dispose`. */
export class FakeRocm {
  readonly root = mkdtempSync(join(tmpdir(), 'gpumem-fake-rocm-'));

  /** Builds /opt-like `<root>/rocm-M.m.0` for a release; answers its root and libamdhip64's path. */
  install(name: string, release: FakeRelease): { root: string; hip: string } {
    const root = join(this.root, name);
    const lib = join(root, 'lib');
    mkdirSync(lib, { recursive: true });
    const version = release.major * 10_000_000 + release.minor * 100_000;
    const hip = join(lib, `libamdhip64.so.${release.so ?? release.major}`);
    const b = release.batch;
    this.cc('fake-hip.c', hip, [
      `-DHIP_VER=${version}`,
      `-DBATCH=${b ? 1 : 0}`,
      `-DBATCH_FAIL_IDX=${b?.failIndex ? 1 : 0}`,
      `-DATTRS_OK=${b?.attributes ? 1 : 0}`,
      `-DREFUSE_ALL=${b?.refuseAll ? 1 : 0}`,
    ]);
    if (release.amdSmi) this.cc('fake-smi.c', join(lib, 'libamd_smi.so.24'), ['-DAMDSMI', `-DENUM=${release.amdSmi.enumeration ? 1 : 0}`]);
    if (release.rocmSmi) this.cc('fake-smi.c', join(lib, 'librocm_smi64.so.1'), ['-DRSMI']);
    if (release.header) {
      mkdirSync(join(root, 'include/hip'), { recursive: true });
      const fail = release.header.failIndex ? 'size_t* failIdx, ' : '';
      writeFileSync(
        join(root, 'include/hip/hip_runtime_api.h'),
        `hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes, size_t count,\n    hipMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, ${fail}hipStream_t stream);\n`,
      );
    }
    return { root, hip };
  }

  private cc(source: string, out: string, defines: string[]): void {
    execFileSync('cc', ['-shared', '-fPIC', '-O1', ...defines, '-o', out, join(sourceDir, source)], { stdio: 'pipe' });
  }

  /** The lines the fake libamdhip64 logged (FAKE_HIP_LOG), then empties the log. */
  static takeLog(path: string): string[] {
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      // nothing logged yet
    }
    writeFileSync(path, '');
    return text.split('\n').filter(Boolean);
  }

  dispose(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}
