/**
 * The planner against a run PyTorch measured (benchmarks/pytorch/record_training_peaks.py; fixtures/plan/): the
 * run's shape and Hugging Face's defaults as planner options, and how far the plan is from the measured peak. Shared
 * by the accuracy tests and tools/plan-accuracy.mjs, so that the table in docs/plan-accuracy.md and the tests judge
 * the same thing.
 */
import { estimate } from '../plan/estimate.js';
import { normaliseConfig } from '../plan/model-config.js';
import type { InferOptions, Parallelism, TrainOptions } from '../plan/options.js';

/** One measured run, as record_training_peaks.py writes it. */
export type MeasuredRow = Record<string, unknown> & {
  mode: string;
  model: string;
  config: Record<string, unknown>;
  peakAllocatedBytes: number;
  parameterBytes: number;
};

/** The adapters of a LoRA run as record_lora_peaks.py writes them. */
function loraOf(r: MeasuredRow): TrainOptions['lora'] {
  const l = r.lora as { r: number; targets: string[] | 'all-linear'; dropout: number; dora: boolean; adapter_dtype: 'fp32' | 'bf16' } | undefined;
  if (!l) return undefined;
  return {
    rank: l.r,
    targets: l.targets,
    dtype: l.adapter_dtype,
    dropout: l.dropout > 0,
    dora: l.dora,
    base: (r.baseWeights as NonNullable<TrainOptions['lora']>['base'] | undefined) ?? 'bf16',
    doubleQuant: false,
  };
}

const ONE_GPU: Parallelism = { gpus: 1, nodes: 1, zero: 0, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 };

/** A measured run as planner options: its shape, one GPU, and the defaults the run used (SDPA attention). */
export function measuredOptions(r: MeasuredRow): TrainOptions | InferOptions {
  const attention = (r.attention as TrainOptions['attention'] | undefined) ?? 'sdpa';
  return r.mode === 'train'
    ? {
        mode: 'train',
        precision: r.precision as TrainOptions['precision'],
        optimizer: 'adamw',
        fusedOptimizer: (r.fusedOptimizer as boolean | undefined) ?? false,
        batch: r.batch as number,
        seq: r.seq as number,
        gradAccum: 1,
        recompute: (r.recompute as TrainOptions['recompute'] | undefined) ?? 'none',
        attention,
        framework: 'pytorch',
        sharding: 'ddp',
        parallel: ONE_GPU,
        offload: 'none',
        // the allocated peak is what these runs measured: the flat allowance spares the allocator replay
        fragmentation: 0.05,
        lora: loraOf(r),
      }
    : {
        mode: 'infer',
        batch: r.batch as number,
        prompt: r.prompt as number,
        newTokens: r.newTokens as number,
        kvDtype: 'bf16',
        blockSize: undefined,
        weights: 'bf16',
        attention,
        engine: 'hf',
        serve: { memoryFraction: undefined, maxModelLen: undefined, blockSize: undefined, maxNumBatchedTokens: 8192, maxNumSeqs: 256 },
        parallel: ONE_GPU,
        fragmentation: 0.05,
      };
}

/**
 * The plan against the run: the planner's bytes without its overhead line (the CUDA context and fragmentation
 * allowance, which max_memory_allocated does not count), its error on the peak, and its parameter bytes' error.
 */
export function againstMeasured(r: MeasuredRow): { predictedBytes: number; err: number; paramErr: number } {
  const e = estimate(normaliseConfig(r.config, 'fixture', r.model), measuredOptions(r));
  const predictedBytes = e.totalBytes - e.overheadBytes;
  const bytesPerParam = r.mode === 'train' && r.precision !== 'bf16-pure' ? 4 : 2;
  return { predictedBytes, err: predictedBytes / r.peakAllocatedBytes - 1, paramErr: (e.localParams * bytesPerParam) / r.parameterBytes - 1 };
}
