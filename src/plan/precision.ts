/**
 * The precision policy: every bytes-per-value rule of a training run in one place. Which tensors are fp32, bf16 or
 * quantised follows from --precision, the adapters and the distributed strategy's mixed precision, as PyTorch,
 * PEFT and the frameworks run them (docs/plan-training.md).
 */
import type { LoraOptions, OptimizerName, Precision } from './options.js';

/**
 * The dtype policy a precision's states and activations follow. torchao's float8 training changes no dtype of the
 * run it converts: convert_to_float8_training swaps each nn.Linear for a Float8Linear that keeps the module's own
 * weight (torchao/float8/float8_linear.py, Float8Linear.from_float), and casts weight and input to fp8 only inside
 * the matmul (matmul_with_hp_or_float8_args saves the high-precision tensors for backward). So fp8-torchao is the
 * amp-bf16 run (torchtitan: fp32 parameters, FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), or
 * autocast without FSDP) and fp8-torchao-bf16 the bf16-pure one, each with float8 linears.
 */
const BASE: Partial<Record<Precision, Precision>> = { 'fp8-torchao': 'amp-bf16', 'fp8-torchao-bf16': 'bf16-pure' };
export const basePrecision = (precision: Precision): Precision => BASE[precision] ?? precision;

/** True where torchao's Float8Linear runs the linears (MatmulExtras.fp8). */
export const float8Linears = (precision: Precision): boolean => basePrecision(precision) !== precision;

/** True for the precisions that keep every model state in bf16 (no fp32 copy). */
export const pureBf16 = (precision: Precision): boolean => basePrecision(precision) === 'bf16-pure';

/** True for bitsandbytes' paged optimizers: their states live in CUDA managed memory, outside PyTorch's allocator. */
export const pagedOptimizer = (optimizer: OptimizerName): boolean => optimizer.startsWith('paged-');

/** True for the 8-bit optimizers (bitsandbytes', torchao's). */
export const eightBitOptimizer = (optimizer: OptimizerName): boolean => optimizer.includes('8bit');

/**
 * Bytes per parameter of one optimizer's states, for parameters of `paramBytes` bytes: torch's Adam and AdamW keep two
 * states in the parameter's dtype (zeros_like), SGD with momentum one; 8-bit AdamW two 1-byte states and an fp32
 * absmax per 2048-value block of each (bitsandbytes' blockwise quantisation).
 */
export function optimizerStateBytes(optimizer: OptimizerName, paramBytes: number): number {
  if (eightBitOptimizer(optimizer)) return 2 + (2 * 4) / 2048;
  return (optimizer === 'sgd' ? 1 : 2) * paramBytes;
}

/** Bytes per parameter of weights, gradients, optimizer states (master weights included) and master weights. */
export interface StateBytes {
  weights: number;
  grads: number;
  optimizer: number;
  master: number;
  /** A foreach step's temporary, per value. */
  step: number;
}

/** The model states' bytes per parameter by precision (full fine-tuning, PyTorch). */
export function stateBytes(precision: Precision, optimizer: OptimizerName): StateBytes {
  const base = basePrecision(precision);
  const fp32Weights = base === 'fp32' || base === 'amp-bf16';
  const pure = pureBf16(precision);
  const weights = fp32Weights ? 4 : precision === 'fp8' ? 3 : 2; // fp8: bf16 weights plus fp8 copies for the matmuls
  const grads = fp32Weights ? 4 : 2;
  const master = fp32Weights || pure ? 0 : 4;
  // Adam's states follow the weights they update: fp32 (the master copy, or fp32 weights), or bf16 with the parameters
  return { weights, grads, optimizer: optimizerStateBytes(optimizer, pure ? 2 : 4) + master, master, step: master || fp32Weights ? 4 : 2 };
}

/**
 * How the blocks compute: the residual stream's bytes per value (R), the matmul outputs' (C), and whether
 * torch.autocast casts (and caches bf16 copies of fp32 weights).
 */
export interface ComputeDtypes {
  R: number;
  C: number;
  autocast: boolean;
}

/**
 * The blocks' dtypes. `bf16Params`: the strategy gathers bf16 weights and computes without autocast (FSDP's mixed
 * precision under amp-bf16). A frozen base under adapters sets the residual stream's dtype: 16 bits, or 32 for an fp32
 * base.
 */
export function computeDtypes(precision: Precision, lora: Pick<LoraOptions, 'base'> | undefined, bf16Params = false): ComputeDtypes {
  const p = bf16Params ? 'bf16-pure' : basePrecision(precision);
  const autocast = p === 'amp-bf16';
  // gathered bf16 weights make every norm and residual bf16, a frozen fp32 base's as well
  const R = lora && !bf16Params ? (lora.base === 'fp32' ? 4 : 2) : p === 'fp32' || autocast ? 4 : 2;
  return { R, C: autocast ? 2 : R, autocast };
}

/** Bytes per value of an element of an activation in the plain precision (the MoE router's tensors). */
export const activationBytes = (p: Precision): number => (basePrecision(p) === 'fp32' ? 4 : 2);
/** Bytes of the residual stream in the plain precision (fp32 under autocast, whose weights are fp32). */
export const streamBytes = (p: Precision): number => (basePrecision(p) === 'fp32' || basePrecision(p) === 'amp-bf16' ? 4 : 2);

/** The adapters' bytes per value (PEFT's default, autocast_adapter_dtype=True: fp32). */
export const adapterBytes = (lora: Pick<LoraOptions, 'dtype'>): number => (lora.dtype === 'bf16' || lora.dtype === 'fp16' ? 2 : 4);

/** True for a base bitsandbytes quantises (the adapters are then QLoRA-style). */
export const quantisedBase = (lora: Pick<LoraOptions, 'base'> | undefined): boolean =>
  !!lora && (lora.base === 'nf4' || lora.base === 'fp4' || lora.base === 'int8');

/**
 * Bytes per quantised weight: 4-bit packs two per byte plus an fp32 absmax per 64-value block (double quantisation:
 * an 8-bit absmax per block plus an fp32 second-level absmax per 256 blocks); LLM.int8() one byte plus an fp32 scale
 * per output row (4 / in per weight); a 16- or 32-bit base its dtype.
 */
export function baseBytesPerWeight(lora: Pick<LoraOptions, 'base' | 'doubleQuant'>, inFeatures: number): number {
  const b = lora.base;
  if (b === 'nf4' || b === 'fp4') return lora.doubleQuant ? 0.5 + 1 / 64 + 4 / (64 * 256) : 0.5 + 4 / 64;
  if (b === 'int8') return 1 + 4 / inFeatures;
  return b === 'fp32' ? 4 : 2;
}
