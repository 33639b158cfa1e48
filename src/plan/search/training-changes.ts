/**
 * The changes a training run can make, as rows: what each sets, where it applies, and what it costs (each part
 * counted from the model's shape or the machine's links, with its source).
 */
import type { TrainOptions } from '../options.js';
import { frameworkOf } from '../frameworks/registry.js';
import { countParams } from '../params.js';
import { basePrecision } from '../precision.js';
import type { PlanInputs } from '../schema.js';
import type { Change, ChangeContext } from './change.js';
import { type Cost, FREE } from './cost.js';
import { forwardFlops } from './step-time.js';

const train = (c: ChangeContext): TrainOptions => c.options as TrainOptions;
const cost = (part: Partial<Cost> & { words: string[] }): Cost => ({ ...FREE, ...part });
const sixteenBit = (i: PlanInputs): boolean => i.precision === 'amp-bf16' || i.precision === 'bf16';
/** The framework's FSDP version, as --fsdp names it. */
const fsdpVersion = (i: PlanInputs): '1' | '2' => (frameworkOf(i.framework).fsdp === 'fsdp1' ? '1' : '2');
const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;

/**
 * The share of a step's FLOPs that recomputation adds: one more forward of what it recomputes, against the step's
 * forward and backward (3 forwards). full: every block; op (torchtitan's per-op policy keeps every other matmul's
 * output and attention's): half the blocks' matmuls; selective: attention's scores and values (Korthikanti et al.
 * 2022). More recomputed is never cheaper: selective and op are each within full.
 */
export function recomputeShare(ctx: Pick<ChangeContext, 'model' | 'options'>, level: 'selective' | 'op' | 'full'): number {
  const f = forwardFlops(ctx.model, (ctx.options as TrainOptions).seq);
  const step = 3 * (f.linear + f.attention + f.head);
  const again = level === 'full' ? f.linear + f.attention : level === 'op' ? f.linear / 2 : f.attention;
  return again / step;
}

function recompute(level: 'selective' | 'op' | 'full', what: string): Change {
  return {
    knob: 'recompute',
    says: `--recompute ${level}: ${what} recomputed in the backward pass`,
    set: () => ({ recompute: level }),
    // selective and op are each a part of full: from one of them only full recomputes more
    applies: (i) => (i.recompute === 'none' ? true : level === 'full' && i.recompute !== 'full'),
    cost: (c) => {
      const share = recomputeShare(c, level) - (c.base.recompute === 'none' ? 0 : recomputeShare(c, c.base.recompute));
      return cost({ compute: share, words: [`${pct(share)} more FLOPs: one more forward of ${what}, counted from the shape`] });
    },
  };
}

/** Bytes one GPU sends to and from the host per step when the optimizer (or the parameters too) live there. */
function offloadBytes(c: ChangeContext, params: boolean): number {
  const o = train(c);
  const n = countParams(c.model).total / (o.parallel.zero >= 1 ? o.parallel.gpus / (o.parallel.tp * o.parallel.pp) : 1) / (o.parallel.tp * o.parallel.pp);
  const trained = o.lora ? 0.01 * n : n;
  // gradients down (fp32 under autocast, else 16-bit) and the updated 16-bit parameters back (ZeRO-Offload, Ren et al. 2021)
  const states = trained * ((basePrecision(o.precision) === 'amp-bf16' || o.precision === 'fp32' ? 4 : 2) + 2);
  // parameter offload fetches every parameter in the forward and again in the backward pass (ZeRO-Infinity)
  return states + (params ? 2 * 2 * n : 0);
}

function offload(to: 'optimizer' | 'params'): Change {
  return {
    knob: 'offload',
    says:
      to === 'optimizer'
        ? '--offload optimizer: optimizer states in pinned host memory, the step on the CPU'
        : '--offload params: parameters and optimizer states in pinned host memory',
    set: () => ({ offload: to }),
    applies: (i) => i.offload === 'none' || (to === 'params' && i.offload === 'optimizer'),
    cost: (c) => {
      const s = offloadBytes(c, to === 'params') / (c.machine.hostLinkGBps * 1e9);
      return cost({
        transferSeconds: s,
        words: [`${(s * 1000).toFixed(0)} ms per step on the host link at ${c.machine.hostLinkGBps} GB/s (${c.machine.hostLinkSource})`],
      });
    },
  };
}

function microBatch(k: number): Change {
  return {
    knob: 'micro-batch',
    says: `micro-batch / ${k} with ${k}x the gradient accumulation: the same global batch`,
    set: (i) => ({ batch: i.batch / k, gradAccum: i.gradAccum * k }),
    applies: (i) => i.batch % k === 0 && !i.optimizerInBackward,
    // assumed: each halving of the micro-batch runs smaller matmuls, about 3% slower
    cost: () =>
      cost({ compute: 0.03 * Math.log2(k), words: [`the same global batch in ${k}x the steps; smaller matmuls (assumed ${pct(0.03 * Math.log2(k))} slower)`] }),
  };
}

function moreGpus(k: number): Change {
  return {
    knob: 'gpus',
    says: `${k}x the GPUs, sharded (FSDP or ZeRO-3)`,
    // FSDP by the framework's version, named: the page's control and the command say the same
    set: (i) => ({
      gpus: i.gpus * k,
      ...(i.zero === 0 && i.fsdp === false && i.framework !== 'megatron' ? { fsdp: fsdpVersion(i) } : {}),
      ...(i.framework === 'megatron' && i.zero === 0 ? { zero: 1 } : {}),
    }),
    applies: (i) => i.nodes === 1,
    cost: (c) => cost({ gpus: k, commSeconds: shardComm(c), words: [`${k}x the GPUs`] }),
  };
}

/**
 * ZeRO-3 / FSDP all-gather the parameters once more in the backward pass: half again DDP's volume (Rajbhandari et
 * al. 2020, section 7.3), bf16 parameters over the GPU-to-GPU link; stages 1 and 2 move what DDP moves.
 */
function shardComm(c: ChangeContext): number {
  const o = train(c);
  if (o.parallel.zero < 3 || o.parallel.gpus === 1) return 0;
  const n = countParams(c.model).total / (o.parallel.tp * o.parallel.pp);
  const bw = (c.machine.peerGBps ?? c.machine.hostLinkGBps) * 1e9;
  return (2 * n * (1 - 1 / o.parallel.gpus)) / bw;
}

function zero(stage: 1 | 2 | 3): Change {
  return {
    knob: 'sharding',
    says:
      stage === 3
        ? '--fsdp: parameters, gradients and optimizer states sharded over the GPUs'
        : `--zero ${stage}: ${stage === 1 ? 'optimizer states' : 'optimizer states and gradients'} sharded over the GPUs`,
    set: (i) => (stage === 3 ? { fsdp: fsdpVersion(i) } : { zero: stage }),
    applies: (i) => i.gpus > 1 && i.zero < stage && i.fsdp === false && (stage === 3 ? i.framework !== 'megatron' : i.framework !== 'megatron' || stage === 1),
    cost: (c) => {
      const s = shardComm(c);
      return cost({
        commSeconds: s,
        words: [
          s
            ? `${(s * 1000).toFixed(0)} ms per step: parameters all-gathered again in the backward pass`
            : 'the same communication volume as DDP (Rajbhandari et al. 2020)',
        ],
      });
    },
  };
}

/** Every training change, cheapest knobs first. */
export const TRAINING_CHANGES: readonly Change[] = [
  {
    knob: 'optimizer-step',
    says: '--fused-optimizer: one fused kernel for the step, no foreach temporaries',
    set: () => ({ fusedOptimizer: true }),
    applies: (i) => !i.fusedOptimizer && (i.optimizer === 'adamw' || i.optimizer === 'adam') && i.framework === 'pytorch',
    // torch.optim.AdamW's docs: the fused implementation is typically fastest
    cost: () => cost({ words: [] }),
  },
  {
    knob: 'attention',
    says: '--attention flash: a fused attention kernel, no s x s matrix',
    set: () => ({ attention: 'flash', flashAttention: false }),
    applies: (i) => i.attention === 'eager' && !i.flashAttention,
    cost: () => cost({ words: [] }),
  },
  {
    knob: 'loss',
    says: '--loss chunked: the cross-entropy upcasts one chunk of logits at a time (torchtune, LitGPT)',
    set: () => ({ loss: 'chunked' }),
    applies: (i) => i.framework === 'pytorch' && i.loss === 'standard',
    cost: () => cost({ words: [] }),
  },
  {
    knob: 'loss',
    says: '--loss fused: a fused linear cross-entropy (Liger Kernel), no logits kept',
    set: () => ({ loss: 'fused' }),
    applies: (i) => i.framework === 'pytorch' && i.loss !== 'fused',
    cost: () => cost({ result: 0.005, words: ["an extra dependency (Liger Kernel's Triton kernel); the same loss"] }),
  },
  {
    knob: 'optimizer-states',
    says: '--optimizer adamw8bit: 8-bit optimizer states (bitsandbytes)',
    set: () => ({ optimizer: 'adamw8bit' }),
    applies: (i) => i.optimizer === 'adamw' || i.optimizer === 'adam',
    cost: () =>
      cost({
        result: 0.02,
        words: ['8-bit states: Dettmers et al. 2022 (8-bit Optimizers via Block-wise Quantization) match 32-bit Adam on the tasks they report'],
      }),
  },
  {
    knob: 'optimizer-states',
    says: '--optimizer paged-adamw8bit: 8-bit states in CUDA managed memory, paged out under pressure',
    set: () => ({ optimizer: 'paged-adamw8bit' }),
    applies: (i) => i.optimizer === 'adamw' || i.optimizer === 'adam' || i.optimizer === 'paged-adamw',
    cost: () => cost({ result: 0.03, words: ['8-bit states (Dettmers et al. 2022), paged to the host when the GPU runs short'] }),
  },
  {
    knob: 'optimizer-in-backward',
    says: '--optimizer-in-backward: each gradient stepped as it is made (torchtune)',
    set: () => ({ optimizerInBackward: true }),
    applies: (i) => !i.optimizerInBackward && i.gradAccum === 1 && i.offload === 'none',
    cost: () => cost({ result: 0.01, words: ['no gradient accumulation and no clipping by the global norm (torchtune refuses both)'] }),
  },
  recompute('selective', "attention's scores and values"),
  recompute('op', "half the blocks' matmuls (torchtitan's per-op policy)"),
  recompute('full', 'every block'),
  microBatch(2),
  microBatch(4),
  {
    knob: 'precision',
    says: '--precision bf16-pure: bf16 weights, gradients and optimizer states, no fp32 copy',
    set: () => ({ precision: 'bf16-pure' }),
    applies: (i) => sixteenBit(i) && i.framework === 'pytorch',
    cost: () =>
      cost({
        result: 0.15,
        words: ['bf16 updates lose small steps: Zamirai et al. 2020 (Revisiting BFloat16 Training) need stochastic rounding or Kahan summation to match fp32'],
      }),
  },
  {
    knob: 'precision',
    says: '--precision amp-bf16: bf16 mixed precision',
    set: () => ({ precision: 'amp-bf16' }),
    applies: (i) => i.precision === 'fp32',
    cost: () => cost({ words: [] }),
  },
  {
    knob: 'activation-offload',
    says: '--activation-offload: kept activations in pinned host memory (torchtune)',
    set: () => ({ activationOffload: true }),
    applies: (i) => !i.activationOffload && i.framework === 'pytorch',
    cost: (c) => {
      const act = c.baseEstimate.activationsBytes;
      const s = (2 * act) / (c.machine.hostLinkGBps * 1e9);
      return cost({
        transferSeconds: s,
        words: [`${(s * 1000).toFixed(0)} ms per step on the host link (out and back in; torchtune overlaps it with compute: an upper bound)`],
      });
    },
  },
  offload('optimizer'),
  offload('params'),
  zero(1),
  zero(2),
  zero(3),
  {
    knob: 'adapters',
    says: '--lora 16: LoRA adapters of rank 16, the base frozen',
    set: () => ({ lora: 16 }),
    applies: (i) => i.lora === undefined,
    cost: () =>
      cost({
        result: 0.5,
        words: [
          'adapters instead of full fine-tuning, a different result: Biderman et al. 2024 (LoRA Learns Less and Forgets Less) find it below full fine-tuning on code and maths',
        ],
      }),
  },
  {
    knob: 'adapters',
    says: '--lora 16 --base-weights nf4: QLoRA, a 4-bit frozen base',
    set: () => ({ lora: 16, baseWeights: 'nf4' }),
    applies: (i) => i.lora === undefined && i.baseWeights === undefined,
    cost: () =>
      cost({
        compute: 0.3,
        result: 0.52,
        words: [
          'adapters instead of full fine-tuning (Biderman et al. 2024); QLoRA matches 16-bit LoRA (Dettmers et al. 2023); 4-bit dequantisation in every matmul (assumed 30% slower)',
        ],
      }),
  },
  {
    knob: 'adapters',
    says: '--base-weights nf4: a 4-bit frozen base (QLoRA)',
    set: () => ({ baseWeights: 'nf4' }),
    applies: (i) => i.lora !== undefined && (i.baseWeights === undefined || i.baseWeights === 'bf16' || i.baseWeights === 'fp16' || i.baseWeights === 'fp32'),
    cost: () =>
      cost({
        compute: 0.3,
        result: 0.02,
        words: ['QLoRA matches 16-bit LoRA (Dettmers et al. 2023); 4-bit dequantisation in every matmul (assumed 30% slower)'],
      }),
  },
  moreGpus(2),
  moreGpus(4),
  moreGpus(8),
];
