/**
 * Whether the operating system sees a GPU, apart from whether gpumem's backend can open it: the NVIDIA driver's
 * /proc/driver/nvidia/gpus (else `nvidia-smi -L`), the AMD kernel driver's KFD topology nodes with SIMDs (else
 * `amd-smi list` or `rocm-smi --showid`). Tests use it so that a GPU that is present but cannot be opened fails rather
 * than skips.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Lines a tool prints, or [] where it is not installed or fails (5 s at most). */
function run(tool: string, args: string[]): string[] {
  try {
    return execFileSync(tool, args, { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] }).split('\n');
  } catch {
    return [];
  }
}

/** GPU nodes in the KFD topology: nodes whose properties give a non-zero simd_count (CPU nodes give 0). */
export function kfdGpuNodes(sys = '/sys'): number {
  const root = join(sys, 'class/kfd/kfd/topology/nodes');
  let n = 0;
  for (const node of list(root)) {
    let text = '';
    try {
      text = readFileSync(join(root, node, 'properties'), 'utf8');
    } catch {
      continue;
    }
    const simd = /^simd_count\s+(\d+)/m.exec(text);
    if (simd && Number(simd[1]) > 0) n++;
  }
  return n;
}

/**
 * What shows that the system has a GPU of this vendor (a sentence naming the source), or undefined when nothing does.
 * `tools` is false to look at the kernel's files only.
 */
export function systemSeesGpu(vendor: 'cuda' | 'hip', options: { sys?: string; proc?: string; tools?: boolean } = {}): string | undefined {
  const { sys = '/sys', proc = '/proc', tools = true } = options;
  if (vendor === 'cuda') {
    const gpus = list(join(proc, 'driver/nvidia/gpus')).length;
    if (gpus > 0) return `the NVIDIA driver lists ${gpus} GPU(s) in ${join(proc, 'driver/nvidia/gpus')}`;
    const smi = tools ? run('nvidia-smi', ['-L']).filter((l) => /^GPU \d+:/.test(l)).length : 0;
    return smi > 0 ? `nvidia-smi -L lists ${smi} GPU(s)` : undefined;
  }
  const nodes = kfdGpuNodes(sys);
  if (nodes > 0) return `the amdgpu driver's KFD topology lists ${nodes} GPU node(s)`;
  if (!tools) return undefined;
  const amd = run('amd-smi', ['list']).filter((l) => /^GPU: \d+/.test(l)).length;
  if (amd > 0) return `amd-smi list shows ${amd} GPU(s)`;
  const rocm = run('rocm-smi', ['--showid']).filter((l) => /^GPU\[\d+\]/.test(l)).length;
  return rocm > 0 ? `rocm-smi --showid shows ${rocm} GPU line(s)` : undefined;
}
