/**
 * The parameter tensors a GPU holds, before any ZeRO / FSDP sharding: each block's linear layers, its experts and the
 * rest (norms, biases), the adapters, and the ends (embeddings, final norm, output layer) on the pipeline stage that
 * holds them. They add up to the parameters params.ts counts for the GPU's share (tensor, expert, pipeline parallel).
 */
import { adaptedModules, adapterParams, linearModules, outputAdapted } from '../adapters.js';
import type { ModelConfig } from '../model-config.js';
import { adaptedExpertParams } from '../moe-adapters.js';
import type { LoraOptions, Parallelism } from '../options.js';
import type { ParamCounts } from '../params.js';

/** One parameter tensor (or a group that is one to the memory: a block's norms and biases). */
export interface ParamTensor {
  key: string;
  /** Elements on this GPU before sharding over data-parallel ranks. */
  numel: number;
  trains: boolean;
  /** A weight bitsandbytes quantises (a block's linear layers and experts; LitGPT's output layer too). */
  quantised: boolean;
  /** Input features (LLM.int8()'s scale per row). */
  inFeatures: number;
  adapter: boolean;
}

/** A run of identical layers on this GPU. */
export interface LayerKind {
  moe: boolean;
  tensors: ParamTensor[];
}

export interface ParamTable {
  dense: LayerKind;
  moe: LayerKind;
  /** Layers of each kind on this GPU (a pipeline stage's share: the dense layers on the first stage). */
  denseLayers: number;
  moeLayers: number;
  /** Embeddings, final norm and output layer on this stage, and the output layer's adapter. */
  ends: ParamTensor[];
  /** The output layer and the loss are on this GPU. */
  last: boolean;
}

/** The parameter table of `m` on the most-loaded GPU under `p`, with `lora` adapters. */
export function paramTable(m: ModelConfig, c: ParamCounts, p: Parallelism, lora: LoraOptions | undefined, quantisesOutput: boolean): ParamTable {
  const full = !lora;
  const quantised = !!lora && (lora.base === 'nf4' || lora.base === 'fp4' || lora.base === 'int8');
  const perStage = m.layers / p.pp;
  const denseLayers = Math.min(c.denseLayers, perStage);
  const layer = (moe: boolean): LayerKind => {
    const tensors: ParamTensor[] = [];
    const adapted = new Set(lora ? adaptedModules(m, lora, moe).map((l) => l.path) : []);
    let linear = 0;
    for (const l of linearModules(m, moe)) {
      const numel = (l.in * l.out) / p.tp;
      linear += numel;
      tensors.push({ key: l.path, numel, trains: full, quantised, inFeatures: l.in, adapter: false });
      if (adapted.has(l.path))
        tensors.push({
          key: `${l.path}.lora`,
          numel: (lora!.rank * (l.in + l.out) + (lora!.dora ? l.out : 0)) / p.tp,
          trains: true,
          quantised: false,
          inFeatures: l.in,
          adapter: true,
        });
    }
    let experts = 0;
    if (moe && m.moe) {
      experts = ((m.moe.experts / p.ep + m.moe.sharedExperts) * c.expert) / p.tp;
      tensors.push({ key: 'experts', numel: experts, trains: full, quantised, inFeatures: m.hidden, adapter: false });
      const wrapped = lora ? adaptedExpertParams(m, lora) : [];
      const n = wrapped.reduce((s, w) => s + w.rank * m.moe!.experts * (w.in + w.out), 0);
      if (n > 0) tensors.push({ key: 'experts.lora', numel: n / p.tp, trains: true, quantised: false, inFeatures: m.hidden, adapter: true });
    }
    const total = (moe ? c.moeLayer : c.denseLayer) - (moe && m.moe ? m.moe.experts * (1 - 1 / p.ep) * c.expert : 0);
    tensors.push({ key: 'rest', numel: total / p.tp - linear - experts, trains: full, quantised: false, inFeatures: m.hidden, adapter: false });
    return { moe, tensors };
  };
  const last = p.pp === 1 || c.lmHead + c.finalNorm >= c.embedding;
  const ends: ParamTensor[] = [];
  const end = (key: string, numel: number, q = false): void => {
    if (numel > 0) ends.push({ key, numel: numel / p.tp, trains: full, quantised: q, inFeatures: m.hidden, adapter: false });
  };
  if (p.pp === 1) {
    end('embed', c.embedding);
    end('lm_head', c.lmHead, quantisesOutput);
    end('norm', c.finalNorm);
  } else if (last) {
    end('lm_head', c.lmHead, quantisesOutput);
    end('norm', c.finalNorm);
  } else end('embed', c.embedding);
  if (lora && last && outputAdapted(m, lora))
    ends.push({
      key: 'lm_head.lora',
      numel: (lora.rank * (m.hidden + m.vocab) + (lora.dora ? m.vocab : 0)) / p.tp,
      trains: true,
      quantised: false,
      inFeatures: m.hidden,
      adapter: true,
    });
  return { dense: layer(false), moe: layer(true), denseLayers, moeLayers: perStage - denseLayers, ends, last };
}

/** Every tensor of the table with how many times this GPU holds it. */
export function tensorsOf(t: ParamTable): Array<{ t: ParamTensor; count: number }> {
  return [
    ...t.dense.tensors.map((x) => ({ t: x, count: t.denseLayers })),
    ...(t.moeLayers > 0 ? t.moe.tensors.map((x) => ({ t: x, count: t.moeLayers })) : []),
    ...t.ends.map((x) => ({ t: x, count: 1 })),
  ];
}

/** Trainable parameters on this GPU before sharding (the adapters under LoRA). */
export function trainableParams(t: ParamTable): number {
  return tensorsOf(t).reduce((s, { t: x, count }) => s + (x.trains ? x.numel * count : 0), 0);
}

/** The adapters' trainable parameters as PEFT counts them (the check against adapterParams). */
export const adapterCount = adapterParams;
