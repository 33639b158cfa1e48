/** The changes an inference or serving run can make, as rows (training-changes.ts holds training's). */
import type { PlanInputs } from '../schema.js';
import type { Change } from './change.js';
import { type Cost, FREE } from './cost.js';

const cost = (part: Partial<Cost> & { words: string[] }): Cost => ({ ...FREE, ...part });
const wide = (d: string): boolean => d === 'bf16' || d === 'fp16' || d === 'fp32';
const served = (i: PlanInputs): boolean => i.engine !== 'hf';

function tensorParallel(k: number): Change {
  return {
    knob: 'gpus',
    says: `--tp ${k}x: tensor parallel over ${k}x the GPUs`,
    set: (i) => ({ tp: i.tp * k, gpus: i.gpus * k }),
    applies: (i, c) => c.model.heads % (i.tp * k) === 0,
    cost: () => cost({ gpus: k, words: [`${k}x the GPUs; an all-reduce per layer`] }),
  };
}

function halfBatch(k: number): Change {
  return {
    knob: 'batch',
    says: `--batch / ${k}: fewer sequences at once`,
    set: (i) => ({ batch: i.batch / k }),
    applies: (i) => !served(i) && i.batch % k === 0,
    cost: () => cost({ result: 0.1 * Math.log2(k), words: [`${k}x fewer sequences per step (throughput)`] }),
  };
}

/** Every inference and serving change, cheapest knobs first. */
export const SERVING_CHANGES: readonly Change[] = [
  {
    knob: 'memory-fraction',
    says: '--gpu-memory-utilization 0.95: vLLM takes more of the GPU',
    set: () => ({ gpuMemoryUtilization: 0.95 }),
    applies: (i) => i.engine === 'vllm' && (i.gpuMemoryUtilization ?? 0.9) < 0.95,
    cost: () => cost({ result: 0.01, words: ['less left for other processes on the GPU (vLLM default 0.9)'] }),
  },
  {
    knob: 'memory-fraction',
    says: '--mem-fraction-static 0.9: SGLang takes more of the GPU',
    set: () => ({ memFractionStatic: 0.9 }),
    applies: (i) => i.engine === 'sglang' && (i.memFractionStatic ?? 0.88) < 0.9,
    cost: () => cost({ result: 0.01, words: ['less left for activations and other processes'] }),
  },
  {
    knob: 'kv',
    says: '--kv-dtype fp8: an 8-bit KV cache, half the bytes per token',
    set: () => ({ kvDtype: 'fp8' }),
    applies: (i) => wide(i.kvDtype),
    cost: () => cost({ result: 0.02, words: ["small accuracy loss (vLLM's docs on the fp8 KV cache)"] }),
  },
  {
    knob: 'weights',
    says: '--weights fp8: an fp8 checkpoint',
    set: () => ({ weights: 'fp8' }),
    applies: (i) => wide(i.weights),
    cost: () => cost({ result: 0.03, words: ['a quantised checkpoint: small accuracy loss'] }),
  },
  {
    knob: 'weights',
    says: '--weights int4: an AWQ or GPTQ checkpoint',
    set: () => ({ weights: 'int4' }),
    applies: (i) => wide(i.weights) || i.weights === 'fp8' || i.weights === 'int8',
    cost: () => cost({ result: 0.08, words: ['a 4-bit checkpoint (AWQ, GPTQ): some accuracy loss'] }),
  },
  {
    knob: 'context',
    says: '--max-model-len: requests as long as the KV cache holds',
    set: (_, e) => ({ maxModelLen: e.serving?.kvTokens ?? 0 }),
    applies: (i) => served(i),
    cost: () => cost({ result: 0.2, words: ['shorter requests: the longest the KV cache holds'] }),
  },
  halfBatch(2),
  halfBatch(4),
  tensorParallel(2),
  tensorParallel(4),
  tensorParallel(8),
];
