/** Activation memory per layer: PyTorch's saved tensors counted (with a measured correction), and Korthikanti et al.'s formula. */
import { familyLayerDeltaBytesPerToken } from './family-activations.js';
import type { ModelConfig } from './model-config.js';
import { moeExtraBytesPerTokenPerLayer } from './moe-activations.js';
import type { Precision, Recompute } from './options.js';

/**
 * Activation bytes saved per token in one layer by PyTorch autograd (Hugging Face blocks), before the measured
 * correction. h: hidden size, f: MLP intermediate size.
 */
export function pytorchLayerBytesPerToken(m: ModelConfig, precision: Precision): { perToken: number; hCoef: number; fCoef: number } {
  const fp32 = precision === 'fp32';
  const amp = precision === 'amp-bf16';
  let hCoef: number;
  let fCoef: number;
  if (m.family === 'gpt') {
    // fp32: LN inputs 2x4, LN output/linear inputs 2x4, qkv 12, attention out 4, merged heads 4, dropout masks 2;
    //       MLP: fc out, tanh, 0.5x, 1+tanh, GELU out: 5 x 4 bytes per intermediate element.
    // 16-bit (autocast): residual stream and LayerNorm stay fp32 (8), bf16 casts of linear inputs (4), qkv 6,
    //       out 2, merged 2, masks 2; MLP: fc out 2, pow/tanh promoted to fp32 (tanh 4, 1+tanh 4), 0.5x 2, cast 2.
    hCoef = fp32 ? 38 : amp ? 24 : 20;
    fCoef = fp32 ? 20 : amp ? 14 : 10;
    if (!m.dropout) hCoef -= 2;
  } else {
    // fp32: RMSNorm input + normalised output 2 x 8, q after RoPE 4, repeated k and v 8, attention out 4, merged 4;
    //       MLP: gate, up, SiLU out, product: 4 x 4 bytes per intermediate element.
    // 16-bit: RMSNorm computes in fp32 (input 4, normalised 4, bf16 cast 2, twice), attention 5 x 2; MLP 4 x 2.
    // (Hugging Face repeats K and V to every head before SDPA, so keys and values cost as much as queries.)
    hCoef = fp32 ? 16 + 4 + 8 + 8 : 20 + 10;
    fCoef = fp32 ? 16 : 8;
  }
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  // family hooks (family-activations.ts, moe-activations.ts): 0 for GPT-2 and Llama themselves
  const extra = familyLayerDeltaBytesPerToken(m, precision) + moeExtraBytesPerTokenPerLayer(m, precision);
  return { perToken: hCoef * m.hidden + fCoef * f + extra, hCoef, fCoef };
}

/**
 * The correction of the tensor count for what it misses (PyTorch's contiguous copies and temporaries), fit on the ten
 * GPT-2 training runs of fixtures/plan/measured-peaks.json alone (least squares of the peak's relative error); the
 * GPT-2 medium and Llama runs there test it (docs/plan-accuracy.md).
 */
export function pytorchCorrection(precision: Precision): number {
  return precision === 'fp32' ? 1.045 : 1.145;
}

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
