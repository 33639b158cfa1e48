/**
 * LoRA as PEFT builds it: which linear layers a model has, which of them `--lora-targets` names, the adapters'
 * parameter counts (A: r x in, B: out x r, DoRA's magnitude: out) and the frozen base's bytes in each format
 * (bitsandbytes' 4-bit with its quant state, LLM.int8() with its row scales).
 */
import { InvalidArgumentError } from '../errors.js';
import type { ModelConfig } from './model-config.js';
import type { AdapterDtype, BaseWeights, LoraOptions } from './options.js';
import type { ParamCounts } from './params.js';

/** Where a linear layer's input comes from: it decides which copies of that input autograd keeps. */
export type InputSite = 'attn-norm' | 'attn-out' | 'mlp-norm' | 'mlp-act';

/** One linear layer of a transformer block, named as the Hugging Face module path inside the block. */
export interface LinearModule {
  /** The module path inside the block (self_attn.q_proj, mlp.c_proj); PEFT matches a target on its last parts. */
  path: string;
  in: number;
  out: number;
  site: InputSite;
}

/** The linear layers of one block: dense (`moe` false) or a mixture-of-experts layer's (experts are not linear modules). */
export function linearModules(m: ModelConfig, moe = false): LinearModule[] {
  const h = m.hidden;
  const qDim = m.heads * m.headDim;
  const kvDim = m.kvHeads * m.headDim;
  const f = m.intermediate;
  if (m.family === 'gpt')
    return [
      { path: 'attn.c_attn', in: h, out: qDim + 2 * kvDim, site: 'attn-norm' },
      { path: 'attn.c_proj', in: qDim, out: h, site: 'attn-out' },
      { path: 'mlp.c_fc', in: h, out: f, site: 'mlp-norm' },
      { path: 'mlp.c_proj', in: f, out: h, site: 'mlp-act' },
    ];
  const attention: LinearModule[] = [];
  if (m.mla) {
    const a = m.mla;
    const qk = a.qkNopeHeadDim + a.qkRopeHeadDim;
    if (a.qLoraRank)
      attention.push(
        { path: 'self_attn.q_a_proj', in: h, out: a.qLoraRank, site: 'attn-norm' },
        { path: 'self_attn.q_b_proj', in: a.qLoraRank, out: m.heads * qk, site: 'attn-norm' },
      );
    else attention.push({ path: 'self_attn.q_proj', in: h, out: m.heads * qk, site: 'attn-norm' });
    attention.push(
      { path: 'self_attn.kv_a_proj_with_mqa', in: h, out: a.kvLoraRank + a.qkRopeHeadDim, site: 'attn-norm' },
      { path: 'self_attn.kv_b_proj', in: a.kvLoraRank, out: m.heads * (a.qkNopeHeadDim + a.vHeadDim), site: 'attn-norm' },
      { path: 'self_attn.o_proj', in: m.heads * a.vHeadDim, out: h, site: 'attn-out' },
    );
  } else
    attention.push(
      { path: 'self_attn.q_proj', in: h, out: qDim, site: 'attn-norm' },
      { path: 'self_attn.k_proj', in: h, out: kvDim, site: 'attn-norm' },
      { path: 'self_attn.v_proj', in: h, out: kvDim, site: 'attn-norm' },
      { path: 'self_attn.o_proj', in: qDim, out: h, site: 'attn-out' },
    );
  // transformers keeps a mixture's experts as fused 3-d parameters, not nn.Linear: PEFT's targets reach its router
  if (moe && m.moe) return [...attention, { path: 'mlp.gate', in: h, out: m.moe.experts, site: 'mlp-norm' }];
  return [
    ...attention,
    { path: 'mlp.gate_proj', in: h, out: f, site: 'mlp-norm' },
    { path: 'mlp.up_proj', in: h, out: f, site: 'mlp-norm' },
    { path: 'mlp.down_proj', in: f, out: h, site: 'mlp-act' },
  ];
}

/**
 * PEFT's default target modules (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, peft 0.21): c_attn for GPT-2
 * style models, q_proj and v_proj for Llama-style ones. PEFT has none for DeepSeek's latent attention.
 */
export function defaultTargets(m: ModelConfig): string[] | undefined {
  if (m.mla) return undefined;
  return m.family === 'gpt' ? ['c_attn'] : ['q_proj', 'v_proj'];
}

/** True when PEFT's suffix matching takes `target` for the module at `path`. */
const matches = (path: string, target: string): boolean => path === target || path.endsWith(`.${target}`);

/**
 * The linear layers of a block that the adapters wrap.
 * @throws InvalidArgumentError for a target the model does not have (naming the ones it has), no default for the model,
 * or a rank above a wrapped layer's smaller side.
 */
export function adaptedModules(m: ModelConfig, lora: Pick<LoraOptions, 'targets' | 'rank'>, moe = false): LinearModule[] {
  const all = linearModules(m, moe);
  const every = [...linearModules(m, false), ...(m.moe ? linearModules(m, true) : [])];
  const names = [...new Set(every.map((l) => l.path.split('.').pop()!))];
  let targets: string[];
  if (lora.targets === 'all-linear') targets = names;
  else if (lora.targets === 'default') {
    const d = defaultTargets(m);
    if (!d) throw new InvalidArgumentError(`PEFT has no default target modules for ${m.name}: give --lora-targets (its linear layers: ${names.join(', ')})`);
    targets = d;
  } else targets = lora.targets;
  for (const t of targets)
    if (!every.some((l) => matches(l.path, t)))
      throw new InvalidArgumentError(`--lora-targets ${t}: ${m.name} has no such module; its linear layers are ${names.join(', ')} (or all-linear)`);
  const out = all.filter((l) => targets.some((t) => matches(l.path, t)));
  for (const l of out)
    if (lora.rank > Math.min(l.in, l.out))
      throw new InvalidArgumentError(
        `--lora ${lora.rank} exceeds ${l.path.split('.').pop()}'s smaller side (${l.in} -> ${l.out}): the rank is at most ${Math.min(l.in, l.out)}`,
      );
  return out;
}

/** Trainable adapter parameters: r(in + out) per wrapped layer, plus DoRA's magnitude vector (out). */
export function adapterParams(m: ModelConfig, c: ParamCounts, lora: LoraOptions): number {
  const per = (moe: boolean): number => adaptedModules(m, lora, moe).reduce((s, l) => s + lora.rank * (l.in + l.out) + (lora.dora ? l.out : 0), 0);
  return c.denseLayers * per(false) + (c.moeLayers ? c.moeLayers * per(true) : 0);
}

/** Parameters of the linear layers bitsandbytes quantises (every linear layer of the blocks; experts included). */
export function quantisableParams(m: ModelConfig, c: ParamCounts): number {
  const dense = linearModules(m, false).reduce((s, l) => s + l.in * l.out, 0);
  const moe = m.moe ? linearModules(m, true).reduce((s, l) => s + l.in * l.out, 0) + (m.moe.experts + m.moe.sharedExperts) * c.expert : 0;
  return c.denseLayers * dense + c.moeLayers * moe;
}

/**
 * Bytes per quantised weight: 4-bit packs two per byte plus an fp32 absmax per 64-value block (double quantisation:
 * an 8-bit absmax per block plus an fp32 second-level absmax per 256 blocks); LLM.int8() one byte plus an fp32 scale
 * per output row (counted per weight for a square-ish layer: 4 / in).
 */
export function quantisedBytesPerWeight(base: BaseWeights, doubleQuant: boolean, inFeatures: number): number {
  if (base === 'nf4' || base === 'fp4') return doubleQuant ? 0.5 + 1 / 64 + 4 / (64 * 256) : 0.5 + 4 / 64;
  if (base === 'int8') return 1 + 4 / inFeatures;
  return { fp32: 4, bf16: 2, fp16: 2 }[base];
}

export const adapterBytes = (d: AdapterDtype): number => (d === 'fp32' ? 4 : 2);

/** True for a base bitsandbytes quantises (the adapters are then QLoRA-style). */
export const quantisedBase = (b: BaseWeights): boolean => b === 'nf4' || b === 'fp4' || b === 'int8';

/**
 * The adapters' dtype when none is given, as PEFT picks it: autocast_adapter_dtype=True (get_peft_model's default)
 * keeps adapters in fp32 under a bf16 or fp16 base, and a quantised base computes in its compute dtype with fp32
 * adapters too.
 */
export const defaultAdapterDtype = (): AdapterDtype => 'fp32';
