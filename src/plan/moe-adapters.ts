/**
 * LoRA on a mixture's fused experts, as PEFT runs it on transformers 5. transformers keeps each MoE layer's experts as
 * 3-d parameters (`experts.gate_up_proj` [E, 2f, h] and `experts.down_proj` [E, h, f]), not nn.Linear modules. PEFT
 * (0.21, as installed on the H200 machine) reaches them under `all-linear` with its ParamWrapper
 * (huggingface/peft src/peft/tuners/lora/layer.py, read at 5d602fd): one wrapper per parameter, nested, with
 * lora_A = Linear(in, r x E) and lora_B = Linear(r x E, out), and gate_up_proj at twice the rank (its rank_pattern,
 * so that gate and up each get rank r as separate layers would). Its forward adds delta W = einsum(B, A) x scaling to
 * the parameter through torch.nn.utils.parametrize: the merged E x out x in weight is a new tensor each step, and
 * since it now needs a gradient, autograd keeps it and every expert matmul's input for the backward pass.
 * Checked against the trainable count of fixtures/plan/measured-peaks-h200-adapters.json's Mixtral all-linear row
 * (22,545,408 parameters, PEFT's get_nb_trainable_parameters).
 */
import type { ModelConfig } from './model-config.js';
import type { Line, LoraOptions } from './options.js';

/** One fused expert parameter PEFT wraps: its in and out features per expert and the rank PEFT gives it. */
export interface ExpertParam {
  name: 'gate_up_proj' | 'down_proj';
  in: number;
  out: number;
  rank: number;
}

/** The fused expert parameters the adapters wrap in one MoE layer: both under all-linear, none otherwise. */
export function adaptedExpertParams(m: ModelConfig, lora: Pick<LoraOptions, 'targets' | 'rank'>): ExpertParam[] {
  if (!m.moe || lora.targets !== 'all-linear') return [];
  const h = m.hidden;
  const f = m.moe.expertIntermediate;
  return [
    { name: 'gate_up_proj', in: h, out: 2 * f, rank: 2 * lora.rank },
    { name: 'down_proj', in: f, out: h, rank: lora.rank },
  ];
}

/** Trainable parameters of the expert adapters in one MoE layer: rank x E x (in + out) per wrapped parameter. */
export function expertAdapterParams(m: ModelConfig, lora: Pick<LoraOptions, 'targets' | 'rank'>): number {
  const e = m.moe?.experts ?? 0;
  return adaptedExpertParams(m, lora).reduce((s, p) => s + p.rank * e * (p.in + p.out), 0);
}

/**
 * What the wrapped experts keep for the backward pass: each MoE layer's merged weights (the base's bytes per value,
 * E x in x out per wrapped parameter) and every expert matmul's input (each routed token's copy, C bytes, for the
 * merged weight's gradient). `tokens` on this GPU; `baseBytes` the frozen base's bytes per value (2 for bf16); C the
 * matmuls' bytes per value.
 */
export function expertAdapterLines(m: ModelConfig, lora: LoraOptions, moeLayers: number, tokens: number, baseBytes: number, C: number): Line[] {
  const wrapped = adaptedExpertParams(m, lora);
  if (!m.moe || wrapped.length === 0 || moeLayers === 0) return [];
  const e = m.moe.experts;
  const merged = moeLayers * wrapped.reduce((s, p) => s + baseBytes * e * p.in * p.out, 0);
  const routed = tokens * m.moe.expertsPerToken;
  const inputs = moeLayers * C * routed * wrapped.reduce((s, p) => s + p.in, 0);
  return [
    {
      name: 'activations: merged expert weights (LoRA on fused experts)',
      bytes: merged,
      note: `PEFT's ParamWrapper adds its delta to each fused expert parameter for the step; autograd keeps the merged ${baseBytes}-byte copy: ${e} experts x (gate_up ${m.hidden} x ${2 * m.moe.expertIntermediate} + down ${m.moe.expertIntermediate} x ${m.hidden}) x ${moeLayers} MoE layers`,
      field: 'activationsBytes',
    },
    {
      name: 'activations: expert inputs kept for the merged weights',
      bytes: inputs,
      note: `${routed} routed tokens (${m.moe.expertsPerToken} per token) x (${wrapped.map((p) => p.in).join(' + ')}) values x ${C} bytes x ${moeLayers} MoE layers`,
      field: 'activationsBytes',
    },
  ];
}
