/**
 * Finding vendor libraries at run time. Nothing is linked at build time: each backend names the files it wants
 * (newest version first) and this module looks for them in the override variable, the vendor's usual
 * directories, pip's nvidia-* wheels and finally the dynamic loader's own path.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** A library to look for. */
export interface LibrarySpec {
  /** Environment variable naming the exact file to load; when set nothing else is tried. */
  envVar: string;
  /** File names in order of preference, e.g. ['libcudart.so.13', 'libcudart.so.12']. */
  names: readonly string[];
  /** Directories to look in before the loader's path. */
  dirs: readonly string[];
  /**
   * 'names-first' (default): the newest file name in any directory before the next name (CUDA: libcudart.so.13 from
   * wherever it is before any .so.12). 'dirs-first': every name in the first directory before the next directory
   * (ROCm: the install ROCM_PATH names wins, whatever newer version another /opt/rocm-* holds).
   */
  order?: 'names-first' | 'dirs-first';
}

/** A candidate: a full path, or a bare name handed to the loader. */
export interface LibraryCandidate {
  name: string;
  path: string;
  /** True when `path` is a bare name for dlopen's own search. */
  viaLoader: boolean;
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Expands a path whose components may hold one '*' each into the existing directories it matches. */
export function expandGlob(pattern: string): string[] {
  const parts = pattern.split('/');
  let current = [parts[0] === '' ? '/' : parts[0]!];
  for (const part of parts.slice(1)) {
    if (part === '') continue;
    const next: string[] = [];
    for (const base of current) {
      if (!part.includes('*')) {
        const p = join(base, part);
        if (existsSync(p)) next.push(p);
        continue;
      }
      const [pre, post] = part.split('*', 2) as [string, string];
      for (const entry of listDir(base).sort().reverse()) {
        if (entry.startsWith(pre) && entry.endsWith(post) && entry.length >= pre.length + post.length) next.push(join(base, entry));
      }
    }
    current = next;
  }
  return current;
}

/** site-packages directories where pip may have put nvidia-* or rocm wheels. */
export function pythonSitePackages(): string[] {
  const roots = [
    '/usr/lib/python3*/site-packages',
    '/usr/lib/python3*/dist-packages',
    '/usr/local/lib/python3*/site-packages',
    '/usr/local/lib/python3*/dist-packages',
    join(homedir(), '.local/lib/python3*/site-packages'),
    '/opt/*/.venv/lib/python3*/site-packages',
    '/opt/conda/lib/python3*/site-packages',
  ];
  for (const v of ['VIRTUAL_ENV', 'CONDA_PREFIX']) {
    const root = process.env[v];
    if (root) roots.unshift(join(root, 'lib/python3*/site-packages'));
  }
  return [...new Set(roots.flatMap(expandGlob))];
}

/** Every candidate for a library, in the order it should be tried. */
export function libraryCandidates(spec: LibrarySpec): LibraryCandidate[] {
  const override = process.env[spec.envVar];
  if (override) return [{ name: override, path: override, viaLoader: false }];
  const dirs = [...new Set(spec.dirs.flatMap((d) => (d.includes('*') ? expandGlob(d) : [d])))];
  const out: LibraryCandidate[] = [];
  if (spec.order === 'dirs-first') {
    for (const dir of dirs) {
      for (const name of spec.names) {
        const path = join(dir, name);
        if (existsSync(path)) out.push({ name, path, viaLoader: false });
      }
    }
    for (const name of spec.names) out.push({ name, path: name, viaLoader: true });
    return out;
  }
  for (const name of spec.names) {
    for (const dir of dirs) {
      const path = join(dir, name);
      if (existsSync(path)) out.push({ name, path, viaLoader: false });
    }
    out.push({ name, path: name, viaLoader: true });
  }
  return out;
}

/** The file that a library loaded through the loader's path came from, read off /proc/self/maps. */
export function mappedPathOf(name: string): string | undefined {
  try {
    const maps = readFileSync('/proc/self/maps', 'utf8');
    for (const line of maps.split('\n')) {
      const i = line.indexOf('/');
      if (i < 0) continue;
      const file = line.slice(i);
      const base = file.slice(file.lastIndexOf('/') + 1);
      if (base === name || base.startsWith(name + '.')) return file;
    }
  } catch {
    // no /proc: the path stays unknown
  }
  return undefined;
}

/** Resolves symbolic links for display; returns the input when it cannot. */
export function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** Directories searched for CUDA libraries. */
export function cudaLibraryDirs(kind: 'cudart' | 'nvrtc' | 'driver' | 'nvml' | 'nccl'): string[] {
  const homes = [process.env.CUDA_HOME, process.env.CUDA_PATH].filter((x): x is string => !!x);
  const dirs: string[] = [];
  for (const h of homes) dirs.push(join(h, 'lib64'), join(h, 'lib'), join(h, 'targets/*/lib'));
  if (kind === 'driver' || kind === 'nvml' || kind === 'nccl')
    dirs.push('/usr/local/nvidia/lib64', '/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib/wsl/lib');
  // NCCL also comes with pip's nvidia-nccl wheels (nvidia/nccl/lib), which PyTorch installs
  if (kind === 'nccl') for (const sp of pythonSitePackages()) dirs.push(join(sp, 'nvidia/nccl/lib'), join(sp, 'nvidia/cu13/lib'));
  dirs.push('/usr/local/cuda/lib64', '/usr/local/cuda/targets/*/lib', '/usr/local/cuda-*/lib64', '/usr/local/cuda-*/targets/*/lib');
  if (kind === 'cudart' || kind === 'nvrtc') {
    const wheel = kind === 'cudart' ? 'cuda_runtime' : 'cuda_nvrtc';
    for (const sp of pythonSitePackages()) dirs.push(join(sp, 'nvidia/cu13/lib'), join(sp, `nvidia/${wheel}/lib`));
  }
  return dirs;
}

/**
 * Directories searched for ROCm libraries, one install after the other: ROCM_PATH, HIP_PATH, /opt/rocm, then the
 * versioned /opt/rocm-* installs (newest name first), then pip's ROCm wheels. Search them 'dirs-first'.
 */
export function rocmLibraryDirs(env: NodeJS.ProcessEnv = process.env, opt = '/opt'): string[] {
  const homes = [env.ROCM_PATH, env.HIP_PATH].filter((x): x is string => !!x);
  const dirs: string[] = [];
  for (const h of homes) dirs.push(join(h, 'lib'), join(h, 'lib64'));
  dirs.push(join(opt, 'rocm/lib'), join(opt, 'rocm-*/lib'));
  for (const sp of pythonSitePackages()) dirs.push(join(sp, '_rocm_sdk_core/lib'), join(sp, 'torch/lib'));
  return dirs;
}

/** The ROCm install a library came from: the folder above its lib/ folder (undefined for the loader's path). */
export function installRootOf(path: string | undefined): string | undefined {
  if (!path?.startsWith('/')) return undefined;
  const dir = path.slice(0, path.lastIndexOf('/'));
  return /\/lib(64)?$/.test(dir) ? dir.replace(/\/lib(64)?$/, '') : dir;
}
