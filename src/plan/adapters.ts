/**
 * LoRA as PEFT builds it: which linear layers a model has, which of them `--lora-targets` names, the adapters'
 * parameter counts (A: r x in, B: out x r, DoRA's magnitude: out) and the frozen base's bytes in each format
 * (bitsandbytes' 4-bit with its quant state, LLM.int8() with its row scales).
 */
import { expertAdapterParams } from './moe-adapters.js';
import { InvalidArgumentError } from '../errors.js';
import type { ModelConfig } from './model-config.js';
import type { AdapterDtype, BaseWeights, LoraOptions } from './options.js';
import type { ParamCounts } from './params.js';
import type { InputName, PlanInputs } from './schema.js';

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

/** A block's linear layers by role, named as transformers names them for one family of model_type values. */
interface BlockNames {
  /** Separate q, k, v projections, or one fused projection (its name). */
  qkv: [string, string, string] | string;
  out: string;
  /** Gated MLP: gate and up (or one fused gate_up), down; plain MLP: up (fc1), down (fc2). */
  gate?: string;
  up: string;
  down: string;
}

const LLAMA: BlockNames = {
  qkv: ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'],
  out: 'self_attn.o_proj',
  gate: 'mlp.gate_proj',
  up: 'mlp.up_proj',
  down: 'mlp.down_proj',
};
const NAMES: Record<string, BlockNames> = {
  gpt2: { qkv: 'attn.c_attn', out: 'attn.c_proj', up: 'mlp.c_fc', down: 'mlp.c_proj' },
  gpt_bigcode: { qkv: 'attn.c_attn', out: 'attn.c_proj', up: 'mlp.c_fc', down: 'mlp.c_proj' },
  gpt_neo: {
    qkv: ['attn.attention.q_proj', 'attn.attention.k_proj', 'attn.attention.v_proj'],
    out: 'attn.attention.out_proj',
    up: 'mlp.c_fc',
    down: 'mlp.c_proj',
  },
  gpt_neox: { qkv: 'attention.query_key_value', out: 'attention.dense', up: 'mlp.dense_h_to_4h', down: 'mlp.dense_4h_to_h' },
  falcon: { qkv: 'self_attention.query_key_value', out: 'self_attention.dense', up: 'mlp.dense_h_to_4h', down: 'mlp.dense_4h_to_h' },
  phi: { qkv: ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'], out: 'self_attn.dense', up: 'mlp.fc1', down: 'mlp.fc2' },
  phi3: { qkv: 'self_attn.qkv_proj', out: 'self_attn.o_proj', gate: 'mlp.gate_up_proj', up: 'mlp.gate_up_proj', down: 'mlp.down_proj' },
  starcoder2: { qkv: LLAMA.qkv, out: LLAMA.out, up: 'mlp.c_fc', down: 'mlp.c_proj' },
};

/** The module names of `m`'s blocks: by its model_type, else by the block it has (GPT-2's or Llama's). */
function blockNames(m: ModelConfig): BlockNames {
  const byType = m.modelType ? NAMES[m.modelType] : undefined;
  if (byType) return byType;
  if (m.family === 'gpt') return NAMES.gpt2!;
  return m.gatedMlp ? LLAMA : { ...LLAMA, gate: undefined, up: 'mlp.up_proj' };
}

/**
 * What PEFT's adapters cannot be asked for: a quantised base trained in full, a base format or adapters' option
 * without adapters, a precision PEFT does not compute in, bitsandbytes' options without a 4-bit base.
 */
export function adapterRefusal(i: PlanInputs, _given: (k: InputName) => boolean): string | undefined {
  const quantised = i.baseWeights === 'nf4' || i.baseWeights === 'fp4' || i.baseWeights === 'int8';
  const fourBit = i.baseWeights === 'nf4' || i.baseWeights === 'fp4';
  if (i.lora === undefined) {
    if (quantised)
      return `a ${i.baseWeights === 'int8' ? '8-bit' : '4-bit'} base (--base-weights ${i.baseWeights}) cannot be fine-tuned in full: give --lora R (QLoRA)`;
    if (i.baseWeights !== undefined) return '--base-weights is the frozen base under adapters: give --lora R';
    return undefined;
  }
  if (i.precision !== 'amp-bf16' && i.precision !== 'bf16-pure' && i.precision !== 'fp32')
    return `--lora computes as PEFT does: --precision amp-bf16 (autocast, the default), bf16-pure (no autocast) or fp32, not ${i.precision}`;
  if (i.bnbVersion !== undefined && !fourBit) return '--bnb-version is for a 4-bit base: give --base-weights nf4 or fp4';
  if (i.doubleQuant && !fourBit) return "--double-quant quantises a 4-bit base's absmax: give --base-weights nf4 or fp4";
  if (i.baseWeights === 'fp32' && i.precision !== 'fp32' && i.precision !== 'amp-bf16') return `an fp32 base contradicts --precision ${i.precision}`;
  return undefined;
}

/** The output layer's module name (GPT-NeoX calls it embed_out). */
export const outputName = (m: ModelConfig): string => (m.modelType === 'gpt_neox' ? 'embed_out' : 'lm_head');

/**
 * The linear layers of one block, named as transformers names the modules of the model's family: dense (`moe`
 * false) or a mixture-of-experts layer's (whose experts are not linear modules: PEFT's names reach its router).
 */
export function linearModules(m: ModelConfig, moe = false): LinearModule[] {
  const h = m.hidden;
  const qDim = m.heads * m.headDim;
  const kvDim = m.kvHeads * m.headDim;
  const f = m.intermediate;
  const attention: LinearModule[] = [];
  const n = blockNames(m);
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
  } else {
    if (typeof n.qkv === 'string') attention.push({ path: n.qkv, in: h, out: qDim + 2 * kvDim, site: 'attn-norm' });
    else
      attention.push(
        { path: n.qkv[0], in: h, out: qDim, site: 'attn-norm' },
        { path: n.qkv[1], in: h, out: kvDim, site: 'attn-norm' },
        { path: n.qkv[2], in: h, out: kvDim, site: 'attn-norm' },
      );
    attention.push({ path: n.out, in: qDim, out: h, site: 'attn-out' });
  }
  // transformers keeps a mixture's experts as fused 3-d parameters, not nn.Linear: PEFT's targets reach its router
  if (moe && m.moe) return [...attention, { path: 'mlp.gate', in: h, out: m.moe.experts, site: 'mlp-norm' }];
  const mlp: LinearModule[] = [];
  if (n.gate === n.up && n.gate && !m.arch.separateGateUp) mlp.push({ path: n.up, in: h, out: 2 * f, site: 'mlp-norm' });
  else {
    if (n.gate) mlp.push({ path: n.gate, in: h, out: f, site: 'mlp-norm' });
    mlp.push({ path: n.up, in: h, out: f, site: 'mlp-norm' });
  }
  mlp.push({ path: n.down, in: f, out: h, site: 'mlp-act' });
  return [...attention, ...mlp];
}

/**
 * PEFT's default target modules for the model_type (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, huggingface/
 * peft src/peft/utils/constants.py at 5d602fd); undefined where PEFT has none and asks for target_modules.
 */
const PEFT_DEFAULTS: Record<string, string[]> = {
  gpt2: ['c_attn'],
  gpt_bigcode: ['c_attn'],
  gpt_neox: ['query_key_value'],
  gpt_neo: ['q_proj', 'v_proj'],
  falcon: ['query_key_value'],
  phi: ['q_proj', 'v_proj', 'fc1', 'fc2'],
  llama: ['q_proj', 'v_proj'],
  mistral: ['q_proj', 'v_proj'],
  mixtral: ['q_proj', 'v_proj'],
  stablelm: ['q_proj', 'v_proj'],
  gemma: ['q_proj', 'v_proj'],
  gemma2: ['q_proj', 'v_proj'],
  gemma3_text: ['q_proj', 'v_proj'],
  qwen2: ['q_proj', 'v_proj'],
  qwen3: ['q_proj', 'v_proj'],
};

/** PEFT's default target modules for the model; undefined where PEFT has none (it then asks for target_modules). */
export function defaultTargets(m: ModelConfig): string[] | undefined {
  if (m.modelType !== undefined) return PEFT_DEFAULTS[m.modelType];
  if (m.mla) return undefined;
  return m.family === 'gpt' ? ['c_attn'] : ['q_proj', 'v_proj'];
}

/** True when PEFT's suffix matching takes `target` for the module at `path`. */
const matches = (path: string, target: string): boolean => path === target || path.endsWith(`.${target}`);

/** The targets `lora` names, with PEFT's default and all-linear (every linear layer but the output layer) spelled out. */
function targetNames(m: ModelConfig, lora: Pick<LoraOptions, 'targets'>): string[] {
  const every = [...linearModules(m, false), ...(m.moe ? linearModules(m, true) : [])];
  const names = [...new Set(every.map((l) => l.path.split('.').pop()!))];
  if (lora.targets === 'all-linear') return names;
  if (lora.targets === 'default') {
    const d = defaultTargets(m);
    if (!d)
      throw new InvalidArgumentError(
        `PEFT has no default target modules for ${m.modelType ?? m.name}: give --lora-targets (its linear layers: ${names.join(', ')}, ${outputName(m)})`,
      );
    return d;
  }
  for (const t of lora.targets)
    if (t !== outputName(m) && !every.some((l) => matches(l.path, t)))
      throw new InvalidArgumentError(
        `--lora-targets ${t}: ${m.name} has no such module; its linear layers are ${names.join(', ')} and the output layer ${outputName(m)} (or all-linear)`,
      );
  return lora.targets;
}

/** True when the adapters wrap the output layer too (PEFT's lm_head target, torchtune's apply_lora_to_output). */
export function outputAdapted(m: ModelConfig, lora: Pick<LoraOptions, 'targets'>): boolean {
  return targetNames(m, lora).includes(outputName(m));
}

/**
 * The linear layers of a block that the adapters wrap. PEFT takes any rank; a rank above a layer's smaller side
 * only adds parameters that cannot raise its rank, so it is refused only where that holds for every wrapped layer
 * (rankNotes() names the layers it holds for).
 * @throws InvalidArgumentError for a target the model does not have (naming the ones it has), no default for the
 * model, or a rank above the smaller side of every wrapped layer.
 */
export function adaptedModules(m: ModelConfig, lora: Pick<LoraOptions, 'targets' | 'rank'>, moe = false): LinearModule[] {
  const targets = targetNames(m, lora);
  const out = linearModules(m, moe).filter((l) => targets.some((t) => matches(l.path, t)));
  const wrapped = [...linearModules(m, false), ...(m.moe ? linearModules(m, true) : [])].filter((l) => targets.some((t) => matches(l.path, t)));
  const sides = wrapped.map((l) => Math.min(l.in, l.out));
  if (targets.includes(outputName(m))) sides.push(m.hidden);
  if (sides.length > 0 && sides.every((s) => lora.rank > s))
    throw new InvalidArgumentError(
      `--lora ${lora.rank} exceeds the smaller side of every wrapped layer (at most ${Math.max(...sides)}): a rank above a layer's side cannot raise its rank`,
    );
  return out;
}

/** The wrapped layers whose smaller side the rank exceeds (PEFT takes them; the extra rank adds nothing there). */
export function rankNotes(m: ModelConfig, lora: Pick<LoraOptions, 'targets' | 'rank'>): string[] {
  const wrapped = [...linearModules(m, false), ...(m.moe ? linearModules(m, true) : [])].filter((l) => targetNames(m, lora).some((t) => matches(l.path, t)));
  const over = new Map<string, LinearModule>();
  for (const l of wrapped) if (lora.rank > Math.min(l.in, l.out)) over.set(l.path, l);
  return [...over.values()].map(
    (l) =>
      `LoRA rank ${lora.rank} exceeds ${l.path.split('.').pop()}'s smaller side (${l.in} -> ${l.out}): PEFT wraps it anyway, the extra rank adds parameters there and nothing else`,
  );
}

/**
 * Trainable adapter parameters: r(in + out) per wrapped layer (the output layer's too), plus DoRA's magnitude vector
 * (out), plus the fused experts' adapters where all-linear reaches them.
 */
export function adapterParams(m: ModelConfig, c: ParamCounts, lora: LoraOptions): number {
  const per = (moe: boolean): number => adaptedModules(m, lora, moe).reduce((s, l) => s + lora.rank * (l.in + l.out) + (lora.dora ? l.out : 0), 0);
  const output = outputAdapted(m, lora) ? lora.rank * (m.hidden + m.vocab) + (lora.dora ? m.vocab : 0) : 0;
  // PEFT's all-linear also wraps transformers 5's fused expert parameters (moe-adapters.ts)
  return c.denseLayers * per(false) + (c.moeLayers ? c.moeLayers * (per(true) + expertAdapterParams(m, lora)) : 0) + output;
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
