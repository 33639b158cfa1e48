/**
 * The compute a training step does and how long it takes: the yardstick every cost of a change is measured against.
 * A change that costs transfer or communication time is priced as a share of this step time.
 */
import type { GpuSpec } from '../../catalogue/gpus.js';
import type { ModelConfig } from '../model-config.js';
import type { TrainOptions } from '../options.js';
import { countParams } from '../params.js';

/**
 * Dense 16-bit tensor throughput by GPU (no sparsity), TFLOP/s, from each vendor's datasheet: NVIDIA's H100/H200
 * (989), A100 (312), L40S (362), L4 (121), A10 (125), B200 (2250); AMD's MI300X and MI325X (1307), MI250X (383 for
 * two GCDs), MI210 (181). Matched on the catalogue name; a GPU not here is assumed at 300.
 */
const TFLOPS: ReadonlyArray<[RegExp, number]> = [
  [/GB200/, 2500],
  [/B200/, 2250],
  [/H100 PCIe/, 756],
  [/H100 NVL|H200 NVL/, 835],
  [/H100|H200|GH200/, 989],
  [/H20\b/, 148],
  [/A100/, 312],
  [/L40S/, 362],
  [/\bL4\b/, 121],
  [/A10G/, 70],
  [/A10\b/, 125],
  [/RTX 5090/, 209],
  [/RTX 4090/, 165],
  [/RTX 3090/, 71],
  [/MI355X/, 2500],
  [/MI300X|MI325X/, 1307],
  [/MI250X/, 191],
  [/MI210/, 181],
  [/W7900|7900 XTX/, 122],
];
/** Assumed when the catalogue has no figure for the GPU (a --gpu-memory or a benched device). */
export const ASSUMED_TFLOPS = 300;
/**
 * Model FLOPs utilisation assumed for the step: Llama 3's pre-training reports 38-43% BF16 MFU on H100s (Dubey et
 * al. 2024, table 4); 40% is used for every GPU.
 */
export const MFU = 0.4;

/** The dense 16-bit throughput of a GPU by its name, TFLOP/s, and whether it was assumed. */
export function tflopsOf(g: Pick<GpuSpec, 'name'>): { tflops: number; assumed: boolean } {
  const row = TFLOPS.find(([re]) => re.test(g.name));
  return row ? { tflops: row[1], assumed: false } : { tflops: ASSUMED_TFLOPS, assumed: true };
}

/** One token's forward FLOPs, by part: the blocks' matmuls, the attention scores and values, the output layer. */
export interface ForwardFlops {
  linear: number;
  attention: number;
  head: number;
}

/**
 * A token's forward FLOPs: 2 per active weight of the blocks' matmuls (Kaplan et al. 2020, C = 2N per token), and
 * 4 x seq x heads x head dim per layer for the scores and the weighted values (Korthikanti et al. 2022, section 4).
 */
export function forwardFlops(m: ModelConfig, seq: number): ForwardFlops {
  const c = countParams(m);
  const head = 2 * m.vocab * m.hidden;
  const linear = Math.max(0, 2 * (c.activePerToken - c.embedding - c.lmHead));
  return { linear, attention: 4 * seq * m.heads * m.headDim * m.layers, head };
}

/** Seconds of compute for one optimizer step: forward and backward (3x the forward) of every token, at MFU. */
export function stepSeconds(m: ModelConfig, o: TrainOptions, g: Pick<GpuSpec, 'name'>): number {
  const f = forwardFlops(m, o.seq);
  const tokens = o.batch * o.seq * o.gradAccum;
  const perGpu = o.parallel.tp * o.parallel.pp;
  return (3 * (f.linear + f.attention + f.head) * tokens) / perGpu / (tflopsOf(g).tflops * 1e12 * MFU);
}
