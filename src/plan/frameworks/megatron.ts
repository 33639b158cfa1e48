/**
 * `--framework megatron`: Megatron-LM's own model and optimizer. Activations per layer by Korthikanti et al. 2022
 * (sbh(34 + 5as/h), with its tensor-parallel, sequence-parallel and recomputation forms, Table 2); bf16 parameters,
 * fp32 main gradients, fp32 master weights and Adam states sharded by the distributed optimizer (--zero 1), fused
 * Adam. Megatron's own buffers are not replayed through the caching allocator: a flat allowance stands for it.
 */
import { fusedAttention, type Recompute, type TrainOptions } from '../options.js';
import { lossBackward, lossForward } from '../program/loss.js';
import { float8Linears } from '../precision.js';
import { ddp } from '../strategies/ddp.js';
import { stateLayout } from '../strategies/layout.js';
import type { Sharding } from '../strategies/types.js';
import type { Framework } from './types.js';

/**
 * Korthikanti et al. 2022, activation memory of one transformer layer in bytes (16-bit activations).
 * s sequence, b micro-batch, h hidden, a heads, t tensor-parallel size.
 */
export function korthikantiLayerBytes(s: number, b: number, h: number, a: number, t: number, sp: boolean, recompute: Recompute): number {
  const sbh = s * b * h;
  // full recomputation keeps each layer's input: 2sbh, as Table 2 gives it for every parallel form
  if (recompute === 'full') return 2 * sbh;
  const attn = recompute === 'selective' ? 0 : (5 * a * s) / (h * t);
  if (sp) return sbh * (34 / t + attn);
  if (t === 1) return sbh * (34 + attn);
  return sbh * (10 + 24 / t + attn);
}

/** The recomputation Korthikanti's formula is read for: a fused attention kernel keeps no scores (selective's form). */
export function korthikantiRecompute(o: TrainOptions, fused: boolean): Recompute {
  if (o.recompute === 'full') return 'full';
  return fused || o.recompute !== 'none' ? 'selective' : 'none';
}

export const megatron: Framework = {
  name: 'megatron',
  model: (m) => m,
  attention: (m, o) => ({ fused: fusedAttention(m, o.attention, o.precision), scoreBytes: 0, kernel: o.attention }),
  formulaBlock: (x, o, _moe) => {
    const p = o.parallel;
    return korthikantiLayerBytes(o.seq, o.batch, x.m.hidden, x.m.heads, p.tp, p.sp, korthikantiRecompute(o, megatron.attention(x.m, o).fused));
  },
  lossForward,
  lossBackward,
  dequantisedBytes: () => 0,
  cublasWorkspace: false,
  replay: false,
  fsdp: 'fsdp2',
  fsdpOrigParams: false,
  refuse: (i) => {
    const compile = i.compile === 'blocks' ? '--compile blocks' : '--compile';
    const refused: Array<[boolean, string]> = [
      [i.lora !== undefined, '--lora follows PEFT on PyTorch: it contradicts --framework megatron'],
      [i.recompute === 'op', "--recompute op is torchtitan's per-op checkpointing: it contradicts --framework megatron"],
      [i.activationOffload, "--activation-offload is torchtune's: it contradicts --framework megatron"],
      [!!i.compile, `${compile} is for --framework pytorch`],
      [i.loss !== 'standard', `--loss ${i.loss} is for --framework pytorch`],
      [float8Linears(i.precision), `--precision ${i.precision} is for --framework pytorch (Megatron-style fp8 is --precision fp8)`],
      [i.fsdp !== false, "--fsdp is PyTorch's: Megatron-LM shards with its distributed optimizer (--zero 1)"],
    ];
    return refused.find(([on]) => on)?.[1];
  },
  note: () => undefined,
};

/** Megatron's distributed optimizer: bf16 parameters, fp32 main gradients, fp32 master weights and states. */
export const megatronOptimizer: Sharding = {
  // DDP's hooks (its gradient buckets, nothing gathered) with the distributed optimizer's layout
  ...ddp,
  name: 'megatron',
  layout: (input) => {
    const z = input.o.parallel.zero;
    const sgd = input.o.optimizer === 'sgd';
    return stateLayout(input, {
      params: z >= 3,
      grads: z >= 2,
      states: z >= 1,
      bytes: { weights: 2, grads: 4, optimizer: sgd ? 8 : 12, master: 4, step: 4 },
      fusedStep: true,
      stateName: "Megatron's distributed optimizer",
    });
  },
};
