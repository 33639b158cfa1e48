/**
 * A checkpoint's config.json `quantization_config` read as the --weights scheme it describes, as transformers writes
 * it (src/transformers/utils/quantization_config.py: BitsAndBytesConfig, GPTQConfig, AwqConfig; quant_method names
 * the loader) and AutoAWQ's quant_config (w_bit, q_group_size, version).
 */
import { Fields, type Json } from './config-fields.js';
import type { KvCache, WeightFormat } from './options.js';
import type { ComputeDtype } from './quant-schemes.js';

/** What a checkpoint's quantization_config says of its weights. */
export interface CheckpointQuantization {
  weights: WeightFormat;
  groupSize?: number | undefined;
  computeDtype?: ComputeDtype | undefined;
  /** AwqConfig(do_fuse=True): AutoAWQ's fused modules and their cache of fuse_max_seq_len tokens. */
  kvCache?: KvCache | undefined;
  cacheLen?: number | undefined;
}

const DTYPES: Record<string, ComputeDtype> = { float16: 'fp16', bfloat16: 'bf16', float32: 'fp32', 'torch.float16': 'fp16', 'torch.bfloat16': 'bf16' };

/**
 * The scheme of `q` (a config.json's quantization_config), or undefined for none, or for one gpumem does not follow
 * (another bit width or method: said in `notes`, and the weights planned as --weights says).
 * @throws BadInputError naming the field, for a field of the wrong type.
 */
export function readQuantizationConfig(q: unknown, file: string, notes: string[] = []): CheckpointQuantization | undefined {
  const skip = (why: string): undefined => {
    notes.push(`quantization_config: ${why}; the weights are planned as --weights says`);
    return undefined;
  };
  if (q === undefined || q === null) return undefined;
  if (typeof q !== 'object' || Array.isArray(q)) throw new Fields({}, file).fail('field "quantization_config" must be an object');
  const f = new Fields(q as Json, file);
  const c = f.c;
  // transformers before 4.31 wrote a bitsandbytes config without quant_method
  const method = f.str('quant_method', c.load_in_4bit !== undefined || c.load_in_8bit !== undefined ? 'bitsandbytes' : '').toLowerCase();
  const group = f.int(['group_size', 'q_group_size'], { min: -1 });
  const groupSize = group === undefined || group === -1 ? undefined : group;
  if (method === 'bitsandbytes') {
    if (f.bool('load_in_8bit', false)) return { weights: 'bnb-int8' };
    if (!f.bool('load_in_4bit', false)) return undefined;
    const type = f.str('bnb_4bit_quant_type', 'fp4');
    if (type !== 'nf4' && type !== 'fp4') return skip(`bnb_4bit_quant_type "${type}" is not one bitsandbytes takes (nf4, fp4)`);
    const dtype = c.bnb_4bit_compute_dtype;
    const computeDtype = typeof dtype === 'string' ? DTYPES[dtype] : undefined;
    return { weights: f.bool('bnb_4bit_use_double_quant', false) ? `${type}-dq` : type, computeDtype: computeDtype ?? 'fp32' };
  }
  if (method === 'gptq' || method === 'awq') {
    const bits = f.int(['bits', 'w_bit']) ?? 4;
    if (bits === 8 && method === 'gptq') return { weights: 'int8', groupSize: undefined };
    if (bits !== 4) return skip(`${bits}-bit ${method.toUpperCase()}: gpumem follows 4-bit (and 8-bit GPTQ per weight)`);
    if (method === 'awq') {
      const weights = f.str('version', 'gemm').toLowerCase() === 'gemv' ? 'awq-int4-gemv' : 'awq-int4';
      // transformers' fuse_awq_modules (integrations/awq.py) builds QuantAttentionFused with fuse_max_seq_len
      const fuse = f.bool('do_fuse', false) ? f.int('fuse_max_seq_len', { min: 1 }) : undefined;
      return { weights, groupSize, ...(fuse !== undefined ? { kvCache: 'awq-fused' as const, cacheLen: fuse } : {}) };
    }
    // GPTQConfig's exllama_config defaults to version 1 when the kernel is exllama
    const ex = c.exllama_config as Json | undefined;
    const version = ex && typeof ex === 'object' ? new Fields(ex, file).int('version') : undefined;
    return { weights: version === 2 ? 'gptq-int4' : 'gptq-int4-exllama', groupSize };
  }
  if (method === 'fp8') return { weights: 'fp8' };
  if (method === 'compressed-tensors') return compressedTensors(c, file, notes, skip);
  return skip(`quant_method "${method}" is not one gpumem follows (bitsandbytes, gptq, awq, compressed-tensors, fp8)`);
}

/**
 * A compressed-tensors checkpoint (llm-compressor's; compressed_tensors QuantizationConfig): config_groups, each a
 * scheme of targets and its weights' QuantizationArgs (num_bits, type int or float, strategy, group_size). The
 * first group with weights names the format, planned per weight: 8-bit float as fp8, 8-bit int as int8, 4-bit int
 * (pack-quantized: eight values an int32, a 16-bit scale per group) as int4.
 */
function compressedTensors(c: Json, file: string, notes: string[], skip: (why: string) => undefined): CheckpointQuantization | undefined {
  const groups = c.config_groups;
  const schemes = groups && typeof groups === 'object' && !Array.isArray(groups) ? Object.values(groups as Json) : [];
  const args = schemes
    .map((g) => (g && typeof g === 'object' && !Array.isArray(g) ? (g as Json).weights : undefined))
    .find((w): w is Json => !!w && typeof w === 'object' && !Array.isArray(w));
  if (!args) return skip('compressed-tensors without quantised weights (a sparsity-only or activation-only config)');
  const w = new Fields(args, file);
  const bits = w.int('num_bits') ?? 8;
  const type = w.str('type', 'int').toLowerCase();
  const weights = bits === 8 ? (type === 'float' ? 'fp8' : 'int8') : bits === 4 && type === 'int' ? 'int4' : undefined;
  if (!weights) return skip(`${bits}-bit ${type} compressed-tensors weights: gpumem follows 8-bit int and float, and 4-bit int`);
  // compressed-tensors' CompressedLinear (transformers' run_compressed) decompresses a layer's weight on its first
  // forward and keeps it beside the compressed one (0.9: register_offload_parameter(self, "weight", ...), FROZEN)
  notes.push(
    `quantization_config: compressed-tensors ${bits}-bit ${type} weights, planned per weight as --weights ${weights}; under transformers' run_compressed each layer's decompressed weight, kept from its first forward, is not counted`,
  );
  return { weights };
}
