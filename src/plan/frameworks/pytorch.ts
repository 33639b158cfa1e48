/**
 * PyTorch eager running a Hugging Face model: transformers' blocks (program/block.ts), SDPA as transformers calls it,
 * Hugging Face's loss (an fp32 upcast of the logits, log-softmax) or the chosen one (torchtune's chunked
 * cross-entropy, Liger's fused one, torch.compile's), bitsandbytes' dequantisation in every 4-bit matmul.
 */
import type { ModelConfig } from '../model-config.js';
import { fusedAttention, type TrainOptions } from '../options.js';
import { lossBackward, lossForward } from '../program/loss.js';
import { quantisedBase } from '../precision.js';
import type { Framework } from './types.js';

/** What the math kernel keeps per score: the softmax (and dropout's mask and copy), Gemma 2's softcap's tanh output. */
export function mathScoreBytes(m: ModelConfig, precision: TrainOptions['precision']): number {
  const s = precision === 'fp32' ? 4 : 2;
  return (m.dropout ? 2 * s + 1 : s) + (m.arch.attnSoftcap ? s : 0);
}

export const pytorch: Framework = {
  name: 'pytorch',
  model: (m) => m,
  attention: (m, o) => {
    const fused = fusedAttention(m, o.attention, o.precision);
    const kernel =
      o.attention === 'sdpa'
        ? fused
          ? 'SDPA runs a fused kernel: no s x s matrix'
          : 'SDPA runs the math kernel here (fp32 with grouped-query attention)'
        : o.attention;
    return { fused, scoreBytes: mathScoreBytes(m, o.precision), kernel };
  },
  lossForward,
  lossBackward,
  // the largest quantised layer's weight dequantised to 16 bits for its matmul (forward and backward), one at a time
  dequantisedBytes: (o) => (quantisedBase(o.lora) ? 2 : 0),
  cublasWorkspace: true,
  replay: true,
  fsdp: 'fsdp2',
  // accelerate's FSDP1 plugin as the PEFT and TRL configs run it (fsdp_use_orig_params: false)
  fsdpOrigParams: false,
  refuse: () => undefined,
  note: () => 'activations follow PyTorch eager with Hugging Face blocks (see the note on each line); --framework megatron uses Korthikanti et al. 2022',
};
