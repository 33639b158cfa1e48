/**
 * GPUs gpumem knows by name: memory, bandwidths and host link. Shared by the planner (what fits) and the analyzer
 * (the ceiling a trace's copies are judged against), so it sits below both. Memory is the total the runtime reports
 * (cudaMemGetInfo's, as PyTorch and the serving engines print it: less than the nominal size, which counts memory the
 * driver keeps) where a published or measured figure exists, otherwise the vendor's nominal capacity; memorySource
 * says which, and where the figure comes from.
 */
import { BadInputError } from '../errors.js';

/** A GPU's memory and bandwidths. */
export interface GpuSpec {
  name: string;
  vendor: 'nvidia' | 'amd';
  memoryBytes: number;
  /** How memoryBytes was obtained. */
  memorySource: string;
  /** Device memory bandwidth, GB/s (vendor figure). */
  memoryGBps: number;
  /** Host link bandwidth one way, GB/s (theoretical PCIe after encoding, or the vendor's host link). */
  hostLinkGBps: number;
  /** GPU-to-GPU bandwidth one way, GB/s (vendor figure), where the part has a scale-up link. */
  peerGBps?: number;
}

const GB = 1e9;
const GiB = 2 ** 30;
export const GPUS: Record<string, GpuSpec> = {
  h200: {
    name: 'NVIDIA H200',
    vendor: 'nvidia',
    memoryBytes: 150_109_880_320,
    memorySource: 'cudaMemGetInfo total, measured on an H200 (139.8 GiB)',
    memoryGBps: 4800,
    hostLinkGBps: 63,
    peerGBps: 450,
  },
  h100: {
    name: 'NVIDIA H100 SXM 80GB',
    vendor: 'nvidia',
    memoryBytes: Math.round(79.22 * GiB),
    memorySource:
      'total the runtime reports, as vLLM printed it on H100 80GB GPUs: 79.22 GiB (vllm-project/vllm#10511, #12126; other drivers print 79.11-79.33 GiB)',
    memoryGBps: 3350,
    hostLinkGBps: 63,
    peerGBps: 450,
  },
  'h100-pcie': {
    name: 'NVIDIA H100 PCIe 80GB',
    vendor: 'nvidia',
    memoryBytes: 80 * GB,
    memorySource: 'nominal 80 GB: no published runtime total found (an H100 SXM reports 79.22 GiB)',
    memoryGBps: 2000,
    hostLinkGBps: 63,
    peerGBps: 300,
  },
  'a100-80': {
    name: 'NVIDIA A100 80GB',
    vendor: 'nvidia',
    memoryBytes: 80 * GB,
    memorySource: 'nominal 80 GB: no published runtime total found',
    memoryGBps: 2039,
    hostLinkGBps: 31.5,
    peerGBps: 300,
  },
  'a100-40': {
    name: 'NVIDIA A100 40GB',
    vendor: 'nvidia',
    memoryBytes: Math.round(39.5 * 2 ** 30),
    memorySource: 'total memory as vLLM printed it on an A100 40GB (39.50 GiB; vllm-project/vllm#12330)',
    memoryGBps: 1555,
    hostLinkGBps: 31.5,
    peerGBps: 300,
  },
  l40s: {
    name: 'NVIDIA L40S',
    vendor: 'nvidia',
    memoryBytes: Math.round(44.39 * GiB),
    memorySource: 'total the runtime reports, as vLLM start-up logs print it on L40S GPUs: 44.39 GiB (nvidia-smi shows 46068 MiB; nominal 48 GB)',
    memoryGBps: 864,
    hostLinkGBps: 31.5,
  },
  'rtx-4090': {
    name: 'NVIDIA GeForce RTX 4090',
    vendor: 'nvidia',
    memoryBytes: Math.round(23.55 * GiB),
    memorySource: 'total the runtime reports on RTX 4090s: 23.55 GiB (vllm-project/vllm#13061: 0.98 of it is 23.08 GiB; nvidia-smi shows 24564 MiB)',
    memoryGBps: 1008,
    hostLinkGBps: 31.5,
  },
  mi300x: {
    name: 'AMD Instinct MI300X',
    vendor: 'amd',
    memoryBytes: 192 * GB,
    memorySource: 'nominal 192 GB: no published runtime total found',
    memoryGBps: 5300,
    hostLinkGBps: 63,
    peerGBps: 64,
  },
  mi325x: {
    name: 'AMD Instinct MI325X',
    vendor: 'amd',
    memoryBytes: 256 * GB,
    memorySource: 'nominal 256 GB: no published runtime total found',
    memoryGBps: 6000,
    hostLinkGBps: 63,
    peerGBps: 64,
  },
  mi250x: {
    name: 'AMD Instinct MI250X (one GCD, as the runtime shows it)',
    vendor: 'amd',
    memoryBytes: 64 * GB,
    memorySource: 'nominal 128 GB per package, 64 GB per GCD',
    memoryGBps: 1600,
    hostLinkGBps: 31.5,
    peerGBps: 50,
  },
  mi210: {
    name: 'AMD Instinct MI210',
    vendor: 'amd',
    memoryBytes: 64 * GB,
    memorySource: 'nominal 64 GB: no published runtime total found',
    memoryGBps: 1600,
    hostLinkGBps: 31.5,
  },
};

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest known names to `name`. */
export function closest(name: string, known: readonly string[], n = 3): string[] {
  const q = name.toLowerCase();
  return [...known].sort((x, y) => distance(q, x) - distance(q, y) || x.localeCompare(y)).slice(0, n);
}

/** A catalogue GPU. @throws BadInputError listing the closest names. */
export function catalogueGpu(name: string): GpuSpec {
  const key = name.toLowerCase().replace(/\s+/g, '-');
  const g = GPUS[key];
  if (!g) throw new BadInputError(`unknown GPU "${name}". Closest: ${closest(key, Object.keys(GPUS)).join(', ')}`);
  return g;
}
