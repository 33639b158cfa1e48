/**
 * Quantised weight formats for inference, one row each: what a quantised linear layer stores (its packed weight and
 * its quantisation state, from the libraries' own tensor layouts), the buffers its kernels allocate once at load, and
 * what one of its matmuls allocates for a number of input rows. The 16- and 32-bit formats quantise nothing; the
 * generic int8 / int4 / fp8 rows keep the per-weight figures gpumem has always used for a quantised checkpoint.
 */
import type { WeightFormat } from './options.js';

/** One linear layer: input and output features. */
export interface LinearShape {
  in: number;
  out: number;
}

/** The 16-bit dtype a bitsandbytes 4-bit matmul computes in (bnb_4bit_compute_dtype); fp32 is transformers' default. */
export type ComputeDtype = 'fp16' | 'bf16' | 'fp32';

/** What a quantised layer's matmul runs under. */
export interface MatmulContext {
  /** Rows of its input: tokens x sequences of the call. */
  rows: number;
  /** The model's first forward pass (LLM.int8() turns its row-major weight into the kernel's layout then). */
  first: boolean;
  computeDtype: ComputeDtype;
  /** The quantisation group (bitsandbytes' blocksize). */
  groupSize: number;
  /** AWQ GEMM: the rows from which the AutoAWQ release dequantises the weight for torch.matmul (AwqRelease). */
  dequantFromRows?: number | undefined;
}

export interface QuantScheme {
  /** How the lines' notes name it. */
  says: string;
  /** The quantisation group (GPTQ / AWQ group_size, bitsandbytes' blocksize) when none is given. */
  groupSize: number;
  /** Bytes one quantised linear layer holds, its quantisation state included. */
  linearBytes(l: LinearShape, groupSize: number): number;
  /** Buffers the kernels allocate once for the whole model, sized by its largest quantised layers. */
  scratchBytes?(layers: readonly LinearShape[]): number;
  /** Bytes one matmul of the layer allocates beyond its output while it runs. */
  matmulBytes?(l: LinearShape, x: MatmulContext): number;
  /**
   * Bytes beyond the layer's own that the loader holds while it quantises the layer's 16-bit checkpoint weight on the
   * GPU (bitsandbytes quantises at load); undefined for a checkpoint stored quantised (GPTQ, AWQ), loaded as it is.
   */
  loadBytes?(l: LinearShape, groupSize: number): number;
  /** bitsandbytes: the loader converts nn.Linear modules (which ones it skips is the loader's; GPTQ / AWQ checkpoints keep lm_head in 16 bits). */
  bitsandbytes: boolean;
}

/** A per-weight figure for a format whose layout gpumem does not follow (a generic quantised checkpoint). */
const perWeight = (says: string, bytes: number): QuantScheme => ({ says, groupSize: 0, linearBytes: (l) => l.in * l.out * bytes, bitsandbytes: false });

const DTYPE_BYTES: Record<ComputeDtype, number> = { fp16: 2, bf16: 2, fp32: 4 };

/**
 * bitsandbytes 4-bit (Params4bit / Linear4bit; bitsandbytes/functional.py quantize_4bit at 0.41.0 and 0.42.0): two
 * values per uint8 ((n + 1) / 2 bytes) and an fp32 absmax per block of 64 (blocks = ceil(n / 64)). With
 * compress_statistics (double quantisation) the absmax has its mean taken off and is quantised again by
 * quantize_blockwise(absmax, blocksize=256): a uint8 per block, an fp32 absmax per 256 blocks, the 256-entry fp32
 * dynamic code it quantises with, and the fp32 offset. A matmul of more than one input row (matmul_4bit in
 * autograd/_functions.py: A.numel() != A.shape[-1]) runs MatMul4Bit, which dequantises the whole weight
 * (dequantize_4bit: torch.empty(shape, dtype=quant_state dtype), fp16 since both transformers' Params4bit.cuda and
 * Lightning's _Linear4bit quantise a .half() copy) and casts it .to(A.dtype) when the compute dtype differs; a
 * double-quantised absmax is first dequantised to fp32. One row takes gemv_4bit and allocates nothing.
 */
function bnb4(says: string, doubleQuant: boolean): QuantScheme {
  return {
    says,
    groupSize: 64,
    bitsandbytes: true,
    linearBytes: (l, g) => {
      const n = l.in * l.out;
      const blocks = Math.ceil(n / g);
      const stats = doubleQuant ? blocks + 4 * Math.ceil(blocks / 256) + 256 * 4 + 4 : 4 * blocks;
      return Math.ceil(n / 2) + stats;
    },
    // the load (Params4bit.cuda at 0.41.0, as transformers' set_module_quantized_tensor_to_device calls it, and
    // Lightning's _Linear4bit._quantize_weight): w = weight.contiguous().half().cuda() (2 bytes a weight) is quantised
    // into the layer's own out and absmax; double quantisation keeps the fp32 absmax while quantize_blockwise makes
    // its 8-bit copy (del absmax after it)
    loadBytes: (l, g) => 2 * l.in * l.out + (doubleQuant ? 4 * Math.ceil((l.in * l.out) / g) : 0),
    matmulBytes: (l, x) => {
      if (x.rows <= 1) return 0;
      const n = l.in * l.out;
      const cast = x.computeDtype === 'fp16' ? 0 : n * DTYPE_BYTES[x.computeDtype];
      return 2 * n + cast + (doubleQuant ? 4 * Math.ceil(n / x.groupSize) : 0);
    },
  };
}

/**
 * GPTQ's QuantLinear as AutoGPTQ 0.5.0 lays it out (auto_gptq/nn_modules/qlinear/qlinear_exllama.py and
 * qlinear_exllamav2.py register the same buffers; optimum's and gptqmodel's follow it): qweight int32 (in / 32 x
 * bits, out), qzeros int32 (ceil(in / group), out / 32 x bits), fp16 scales (ceil(in / group), out), g_idx int32 per
 * input feature.
 */
const gptqLinear = (bits: number) => (l: LinearShape, g: number) => {
  const groups = Math.ceil(l.in / g);
  return ((l.in / 32) * bits * l.out + groups * (l.out / 32) * bits) * 4 + groups * l.out * 2 + l.in * 4;
};

/**
 * AutoAWQ 0.1.6 (awq/modules/linear.py): WQLinear_GEMM keeps qweight int32 (in, out / 8), qzeros int32 (in / group,
 * out / 8) and fp16 scales (in / group, out); its gemm_forward_cuda (awq_cuda/quantization/gemm_cuda_gen.cu) sums
 * split_k_iters = 8 partial fp16 outputs (torch::empty({8, rows, out})). WQLinear_GEMV keeps qweight (out, in / 8),
 * qzeros int32 (out, w) and fp16 scales (out, 8 w) with w = calculate_zeros_width(in, group): ceil(in / group / 8)
 * columns of 8 packed zeros (rounded up to a multiple of 2 or 4 for groups of 64 or 32); above 8 rows it calls gemmv2_forward_cuda, split-k 8 as well.
 */
const zerosWidth = (inF: number, g: number): number => {
  const mult = g >= 128 ? 1 : g === 64 ? 2 : 4;
  return Math.ceil(Math.ceil(Math.floor(inF / g) / 8) / mult) * mult;
};
const splitK = (l: LinearShape, rows: number): number => 8 * rows * l.out * 2;

/** The rows, by --weights name. */
export const QUANT_SCHEMES: Record<WeightFormat, QuantScheme | undefined> = {
  fp32: undefined,
  bf16: undefined,
  fp16: undefined,
  fp8: perWeight('fp8 (1 byte per weight)', 1),
  int8: perWeight('int8 (1 byte and a 2-byte scale per 128 weights)', 1 + 2 / 128),
  int4: perWeight('int4 (half a byte and a 2-byte scale per 64 weights)', 0.5 + 2 / 64),
  nf4: bnb4('bitsandbytes NF4: 4 bits, an fp32 absmax per 64', false),
  'nf4-dq': bnb4('bitsandbytes NF4, double-quantised: 4 bits, an 8-bit absmax per 64, an fp32 absmax per 256 blocks', true),
  fp4: bnb4('bitsandbytes FP4: 4 bits, an fp32 absmax per 64', false),
  'fp4-dq': bnb4('bitsandbytes FP4, double-quantised: 4 bits, an 8-bit absmax per 64, an fp32 absmax per 256 blocks', true),
  /**
   * LLM.int8() inference (Linear8bitLt, has_fp16_weights=False; bitsandbytes 0.41.0 nn/modules.py and
   * autograd/_functions.py MatMul8bitLt): int8 CB and an fp32 SCB per output row. The first forward pass turns CB into
   * the igemmlt layout (F.transform(CB, to_order=formatB): a second int8 copy, CB freed after the call); each call
   * quantises its input (double_quant: CA and CAt int8, then col32 C32A) and multiplies into an int32 out32. Past
   * the 6.0 threshold its outlier columns run in 16 bits (subA = A[:, idx], state.subB of idx x out in fp16): their
   * number depends on the inputs and is not counted.
   */
  'bnb-int8': {
    says: 'bitsandbytes LLM.int8(): int8 and an fp32 scale per output row',
    groupSize: 0,
    bitsandbytes: true,
    linearBytes: (l) => l.in * l.out + 4 * l.out,
    // the load (Int8Params.cuda at 0.41.0, as transformers calls it; Lightning's _Linear8bitLt._quantize_weight the
    // same): B = weight.half().cuda() (2 bytes a weight), then double_quant(B) makes the row-major CB the layer keeps
    // and the column-major CBt (int8, one a weight) with their fp32 row and column statistics (get_colrow_absmax);
    // CBt and the column statistics SCBt are deleted after it, B when the call returns
    loadBytes: (l) => 3 * l.in * l.out + 4 * l.in,
    matmulBytes: (l, x) => (x.first ? l.in * l.out : 0) + 3 * x.rows * l.in + 4 * x.rows * l.out,
  },
  /**
   * exllama v1 (auto_gptq/modeling/_utils.py autogptq_post_init at v0.5.0): one temp_dq per device of fp16 (1,
   * max qweight.numel() x 8), the largest layer dequantised for cuBLAS; temp_state (max_input_len, max inner/outer dim)
   * is (1, 1) without act-order.
   */
  'gptq-int4-exllama': {
    says: 'GPTQ 4-bit (qweight, qzeros, fp16 scales per group, g_idx), exllama kernel',
    groupSize: 128,
    bitsandbytes: false,
    linearBytes: gptqLinear(4),
    scratchBytes: (layers) => Math.max(0, ...layers.map((l) => (l.in / 8) * l.out * 8 * 2)),
  },
  /**
   * exllamav2 (qlinear_exllamav2.py at v0.5.0): one scratch per device of the largest scratch_space_fixed():
   * temp_dq_size (in x out x 2 + 128) + temp_fwd_size (out x 2048 x 8 x 4 + 128, its default max_input_len and
   * max_batch_size), each rounded up to 128 bytes.
   */
  'gptq-int4': {
    says: 'GPTQ 4-bit (qweight, qzeros, fp16 scales per group, g_idx), exllamav2 kernel',
    groupSize: 128,
    bitsandbytes: false,
    linearBytes: gptqLinear(4),
    scratchBytes: (layers) => Math.max(0, ...layers.map((l) => l.in * l.out * 2 + 128 + l.out * 2048 * 8 * 4 + 128)),
  },
  'awq-int4': {
    says: 'AWQ 4-bit GEMM (qweight, qzeros, fp16 scales per group)',
    groupSize: 128,
    bitsandbytes: false,
    linearBytes: (l, g) => (l.in * l.out) / 2 + (l.in / g) * (l.out / 8) * 4 + (l.in / g) * l.out * 2,
    // from AutoAWQ 0.2.0 a call of dequantFromRows rows or more dequantises the weight to fp16 (in x out x 2 bytes)
    // and multiplies with torch.matmul (awq/modules/linear/gemm.py WQLinearMMFunction.forward)
    matmulBytes: (l, x) => (x.dequantFromRows !== undefined && x.rows >= x.dequantFromRows ? l.in * l.out * 2 : splitK(l, x.rows)),
  },
  'awq-int4-gemv': {
    says: 'AWQ 4-bit GEMV (qweight, qzeros, fp16 scales per group, padded to 8 groups)',
    groupSize: 128,
    bitsandbytes: false,
    linearBytes: (l, g) => (l.in * l.out) / 2 + l.out * zerosWidth(l.in, g) * (4 + 8 * 2),
    matmulBytes: (l, x) => (x.rows > 8 ? splitK(l, x.rows) : 0),
  },
};

/** The row of a format, or undefined for a 16- or 32-bit one. */
export const quantScheme = (w: WeightFormat): QuantScheme | undefined => QUANT_SCHEMES[w];
