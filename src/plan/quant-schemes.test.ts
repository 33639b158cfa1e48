/**
 * The quantised weight formats: each scheme's bytes against the tensors its library allocates, worked out here from
 * the format's definition; a checkpoint's quantization_config read as the scheme it names; and the plan's lines.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../errors.js';
import { inferOptions } from '../testing/plan-options.js';
import { catalogueModel } from './catalogue.js';
import { estimateInfer } from './infer.js';
import { checkpointInputs, DEFAULT_INPUTS, planOptionsFrom } from './inputs.js';
import { parseConfigText } from './model-config.js';
import { weightBytes } from './model-states.js';
import { QUANT_SCHEMES } from './quant-schemes.js';
import { readQuantizationConfig } from './quantization-config.js';
import { servedWeights } from './quantised-weights.js';

const L = { in: 4096, out: 11008 };
const n = L.in * L.out;
const bytes = (w: keyof typeof QUANT_SCHEMES, g?: number): number => {
  const s = QUANT_SCHEMES[w]!;
  return s.linearBytes(L, g ?? s.groupSize);
};

test('bitsandbytes 4-bit: half a byte per weight and an fp32 absmax per 64; double quantisation an 8-bit absmax, an fp32 one per 256 blocks and the code', () => {
  // quantize_4bit: out uint8 ((n + 1) / 2), absmax fp32 (n / 64)
  assert.equal(bytes('nf4'), n / 2 + (n / 64) * 4);
  assert.equal(bytes('fp4'), bytes('nf4'));
  // compress_statistics: quantize_blockwise(absmax, blocksize=256): uint8 per block, fp32 absmax per 256 blocks, the 256-entry fp32 code, the fp32 offset
  const blocks = n / 64;
  assert.equal(bytes('nf4-dq'), n / 2 + blocks + Math.ceil(blocks / 256) * 4 + 256 * 4 + 4);
  assert.ok(Math.abs(bytes('nf4-dq') / n - (0.5 + 1 / 64 + 4 / (64 * 256))) < 1e-4);
});

test('LLM.int8(): one byte per weight and an fp32 scale per output row', () => {
  assert.equal(bytes('bnb-int8'), n + 4 * L.out);
});

test('GPTQ: int32 qweight packing 8 values, int32 qzeros and fp16 scales per group of 128, an int32 g_idx per input feature', () => {
  const groups = L.in / 128;
  // qweight (in / 32 x 4, out) int32; qzeros (groups, out / 32 x 4) int32; scales (groups, out) fp16; g_idx (in) int32
  const want = (L.in / 8) * L.out * 4 + groups * (L.out / 8) * 4 + groups * L.out * 2 + L.in * 4;
  assert.equal(bytes('gptq-int4'), want);
  assert.equal(bytes('gptq-int4-exllama'), want);
  // a group of 32 holds four times the scales and zeros
  assert.equal(bytes('gptq-int4', 32), (L.in / 8) * L.out * 4 + (L.in / 32) * (L.out / 8) * 4 + (L.in / 32) * L.out * 2 + L.in * 4);
});

test('AWQ: GEMM packs 8 values per int32 with zeros and fp16 scales per group; GEMV packs 8 zeros per int32 column, its groups padded to a multiple of 8', () => {
  const groups = L.in / 128;
  assert.equal(bytes('awq-int4'), n / 2 + groups * (L.out / 8) * 4 + groups * L.out * 2);
  // calculate_zeros_width(4096, 128) = ceil(32 / 8) = 4 int32 columns: qzeros (out, 4) int32, scales (out, 4 x 8) fp16
  assert.equal(bytes('awq-int4-gemv'), n / 2 + L.out * 4 * 4 + L.out * 32 * 2);
  // 11008 / 128 = 86 groups: ceil(86 / 8) = 11 columns of zeros, 88 scales per output row
  const down = QUANT_SCHEMES['awq-int4-gemv']!.linearBytes({ in: 11008, out: 4096 }, 128);
  assert.equal(down, (11008 * 4096) / 2 + 4096 * 11 * 4 + 4096 * 88 * 2);
});

test('the kernels allocate their scratch for the largest layer: exllama a dequantised fp16 copy, exllamav2 that and a forward buffer for 2048 x 8 rows', () => {
  const layers = [L, { in: L.out, out: L.in }];
  assert.equal(QUANT_SCHEMES['gptq-int4-exllama']!.scratchBytes!(layers), n * 2);
  // scratch_space_fixed: in x out x 2 + 128 + out x 2048 x 8 x 4 + 128, the largest over the layers (the wider output)
  assert.equal(QUANT_SCHEMES['gptq-int4']!.scratchBytes!(layers), n * 2 + 128 + L.out * 2048 * 8 * 4 + 128);
});

test('a bitsandbytes 4-bit matmul dequantises its weight to fp16 for more than one row and casts it to the compute dtype; one row dequantises nothing', () => {
  const m = QUANT_SCHEMES.nf4!.matmulBytes!;
  const x = { first: false, groupSize: 64 };
  assert.equal(m(L, { ...x, rows: 1, computeDtype: 'bf16' }), 0);
  assert.equal(m(L, { ...x, rows: 5, computeDtype: 'fp16' }), 2 * n);
  assert.equal(m(L, { ...x, rows: 5, computeDtype: 'bf16' }), 4 * n);
  // double quantisation dequantises the absmax to fp32 first
  assert.equal(QUANT_SCHEMES['nf4-dq']!.matmulBytes!(L, { ...x, rows: 5, computeDtype: 'fp16' }), 2 * n + 4 * (n / 64));
});

test('the generic formats keep their per-weight figures: int4 0.5 + 2/64, int8 1 + 2/128, fp8 1', () => {
  assert.equal(weightBytes('int4'), 0.5 + 2 / 64);
  assert.equal(weightBytes('int8'), 1 + 2 / 128);
  assert.equal(weightBytes('fp8'), 1);
  assert.equal(weightBytes('bf16'), 2);
  assert.equal(weightBytes('nf4'), 0.5 + 4 / 64);
});

test('quantization_config is read as the scheme it names', () => {
  const bnb = {
    quant_method: 'bitsandbytes',
    load_in_4bit: true,
    bnb_4bit_quant_type: 'nf4',
    bnb_4bit_use_double_quant: true,
    bnb_4bit_compute_dtype: 'bfloat16',
  };
  assert.deepEqual(readQuantizationConfig(bnb, 'c.json'), { weights: 'nf4-dq', computeDtype: 'bf16' });
  // transformers' defaults: fp4, fp32 compute
  assert.deepEqual(readQuantizationConfig({ load_in_4bit: true }, 'c.json'), { weights: 'fp4', computeDtype: 'fp32' });
  assert.deepEqual(readQuantizationConfig({ quant_method: 'bitsandbytes', load_in_8bit: true }, 'c.json'), { weights: 'bnb-int8' });
  const gptq = { quant_method: 'gptq', bits: 4, group_size: 128, desc_act: false, exllama_config: { version: 2 } };
  assert.deepEqual(readQuantizationConfig(gptq, 'c.json'), { weights: 'gptq-int4', groupSize: 128 });
  assert.deepEqual(readQuantizationConfig({ quant_method: 'gptq', bits: 4, group_size: -1 }, 'c.json'), { weights: 'gptq-int4-exllama', groupSize: undefined });
  assert.deepEqual(readQuantizationConfig({ quant_method: 'awq', bits: 4, group_size: 64, version: 'GEMV' }, 'c.json'), {
    weights: 'awq-int4-gemv',
    groupSize: 64,
  });
  const notes: string[] = [];
  assert.equal(readQuantizationConfig({ quant_method: 'hqq' }, 'c.json', notes), undefined);
  assert.match(notes[0] ?? '', /hqq/);
  assert.equal(readQuantizationConfig(undefined, 'c.json'), undefined);
});

test("a config.json's quantization_config is the inference plan's weights unless --weights is given", () => {
  const text = JSON.stringify({
    model_type: 'llama',
    hidden_size: 4096,
    intermediate_size: 11008,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 32,
    vocab_size: 32000,
    max_position_embeddings: 4096,
    quantization_config: { quant_method: 'awq', bits: 4, group_size: 128, version: 'gemm' },
  });
  const m = parseConfigText(text, 'config.json', 'llama-awq');
  assert.deepEqual(m.quantization, { weights: 'awq-int4', groupSize: 128 });
  const infer = { ...DEFAULT_INPUTS, mode: 'infer' as const };
  assert.equal(checkpointInputs(m, infer).weights, 'awq-int4');
  assert.equal(checkpointInputs(m, { ...infer, weights: 'bf16', given: ['weights'] }).weights, 'bf16');
  assert.equal(checkpointInputs(m, DEFAULT_INPUTS).weights, DEFAULT_INPUTS.weights);
});

test('the output layer is quantised only where a bitsandbytes loader is told to; a GPTQ checkpoint refuses it', () => {
  const m = catalogueModel('llama-2-7b');
  const kept = servedWeights(m, inferOptions({ weights: 'nf4' }));
  const converted = servedWeights(m, inferOptions({ weights: 'nf4', quantisedOutput: true }));
  const head = m.vocab * m.hidden;
  assert.equal(kept.endBytes - converted.endBytes, head * 2 - (head / 2 + (head / 64) * 4));
  assert.throws(
    () => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer', weights: 'gptq-int4', quantisedOutput: true, given: ['weights', 'quantisedOutput'] }),
    InvalidArgumentError,
  );
});

test('a GPTQ exllamav2 plan holds its scratch from load; a bitsandbytes prefill holds one dequantised layer', () => {
  const m = catalogueModel('llama-2-7b');
  const gptq = estimateInfer(m, inferOptions({ weights: 'gptq-int4', batch: 1, prompt: 8, newTokens: 8 }));
  const scratch = gptq.fullLines.find((l) => l.name.includes('scratch'));
  // the widest layer: gate/up (4096 -> 11008)
  assert.equal(scratch?.bytes, 4096 * 11008 * 2 + 128 + 11008 * 2048 * 8 * 4 + 128);
  const bnb = estimateInfer(m, inferOptions({ weights: 'nf4', computeDtype: 'fp16', batch: 1, prompt: 8, newTokens: 8 }));
  assert.equal(bnb.fullLines.find((l) => l.name.includes('matmul'))?.bytes, 4096 * 11008 * 2);
});

test('bitsandbytes quantises at load: a 4-bit weight holds its fp16 copy (and the fp32 absmax under double quantisation), LLM.int8() its fp16 copy, a column-major int8 copy and fp32 column statistics', () => {
  // Params4bit.cuda: w = weight.half().cuda() (2 bytes a weight); the 4-bit out and absmax are the layer's own
  assert.equal(QUANT_SCHEMES.nf4!.loadBytes!(L, 64), 2 * n);
  assert.equal(QUANT_SCHEMES.fp4!.loadBytes!(L, 64), 2 * n);
  // compress_statistics: the fp32 absmax (one per 64) lives while quantize_blockwise makes its 8-bit copy
  assert.equal(QUANT_SCHEMES['nf4-dq']!.loadBytes!(L, 64), 2 * n + 4 * (n / 64));
  // Int8Params.cuda: B fp16, double_quant(B) -> CB (kept), CBt int8, row stats SCB (kept) and column stats SCBt (in_features fp32)
  assert.equal(QUANT_SCHEMES['bnb-int8']!.loadBytes!(L, 0), 2 * n + n + 4 * L.in);
  // a checkpoint stored quantised is loaded as it is
  for (const w of ['gptq-int4', 'gptq-int4-exllama', 'awq-int4', 'awq-int4-gemv', 'int4'] as const) assert.equal(QUANT_SCHEMES[w]!.loadBytes, undefined, w);
});

test("the load moment: the largest quantised layer's transient while every other weight is held, the peak of a short LLM.int8() run", () => {
  const m = catalogueModel('llama-2-7b');
  const e = estimateInfer(m, inferOptions({ weights: 'bnb-int8', batch: 1, prompt: 8, newTokens: 8 }));
  const load = e.fullLines.find((l) => l.name === 'a weight quantised at load');
  // the largest: down_proj (11008 -> 4096) and gate/up (4096 -> 11008) hold as many weights; 3n + 4 x in is down_proj's
  assert.equal(load?.bytes, 3 * 4096 * 11008 + 4 * 11008);
  const weights = e.lines.find((l) => l.name.startsWith('weights'));
  assert.ok(
    e.lines.some((l) => l.name === 'a weight quantised at load'),
    'eight tokens hold less than the load: the load is the peak',
  );
  assert.ok(weights && e.allocatedPeakBytes >= weights.bytes + 3 * 4096 * 11008);
  // GPTQ loads its packed tensors as they are
  const gptq = estimateInfer(m, inferOptions({ weights: 'gptq-int4', batch: 1, prompt: 8, newTokens: 8 }));
  assert.equal(
    gptq.fullLines.find((l) => l.name === 'a weight quantised at load'),
    undefined,
  );
});

test("AutoAWQ's fused cache: fp16 values and packed keys of batch x kv heads x cache length x head dim per layer, made at load, with each layer's RoPE table", () => {
  const m = catalogueModel('mistral-7b');
  const o = inferOptions({ weights: 'awq-int4', kvDtype: 'bf16', kvCache: 'awq-fused', cacheLen: 1000, batch: 2, prompt: 100, newTokens: 100 });
  const e = estimateInfer(m, o);
  // WindowedCache: v (2, 8, 1000, 128) and k (2, 8, 128 / 8, 1000, 8), fp16, in each of the 32 layers
  const cache = 32 * 2 * (2 * 8 * 1000 * 128 * 2);
  assert.equal(e.fullLines.find((l) => l.name === 'KV cache (fp16)')?.bytes, cache);
  // RoPE: precompute_freqs_cis(128, 2 x 1000), complex64 (8 bytes), per layer
  assert.equal(e.fullLines.find((l) => l.name.includes('RoPE'))?.bytes, 32 * 2 * 1000 * 64 * 8);
  // nothing grows: no copy of a layer's cache
  assert.equal(e.fullLines.find((l) => l.name.includes('growth'))?.bytes ?? 0, 0);
  // a static cache is as long, in the cache dtype, without the table; a dynamic one holds the run's 200 tokens
  const stat = estimateInfer(m, { ...o, kvCache: 'static' });
  assert.equal(stat.fullLines.find((l) => l.name === 'KV cache (bf16)')?.bytes, cache);
  assert.equal(
    stat.fullLines.find((l) => l.name.includes('RoPE')),
    undefined,
  );
  const dyn = estimateInfer(m, { ...o, kvCache: undefined, cacheLen: undefined });
  assert.equal(dyn.fullLines.find((l) => l.name === 'KV cache (bf16)')?.bytes, (cache * 200) / 1000);
});

test("the fused attention's prefill: fp16 scores, their fp32 copy and softmax for every head, beside the repeated keys and values", () => {
  const m = catalogueModel('mistral-7b');
  const s = 1024;
  const e = estimateInfer(m, inferOptions({ weights: 'awq-int4', kvCache: 'awq-fused', batch: 1, prompt: s, newTokens: 16 }));
  const hidden = s * 4 * 4096 * 2;
  const scores = 32 * s * s * (2 + 4 + 4) + 2 * s * 32 * 128 * 2;
  // the MLP's buffers (3 x 14336 per token) are fewer than the scores here: the line is the hidden buffers and the scores
  assert.ok(s * 3 * 14336 * 2 < scores);
  assert.equal(e.fullLines.find((l) => l.name === 'prefill activations')?.bytes, hidden + scores);
});

test('--kv-cache and --cache-len refuse what the caches cannot do', () => {
  const infer = { ...DEFAULT_INPUTS, mode: 'infer' as const, prompt: 100, newTokens: 100 };
  const refuses = (over: Record<string, unknown>, given: string[]): void =>
    assert.throws(() => planOptionsFrom({ ...infer, ...over, given } as typeof DEFAULT_INPUTS), InvalidArgumentError);
  refuses({ cacheLen: 512 }, ['cacheLen']);
  refuses({ kvCache: 'awq-fused', weights: 'nf4' }, ['kvCache', 'weights']);
  refuses({ kvCache: 'static', cacheLen: 150 }, ['kvCache', 'cacheLen']);
  refuses({ kvCache: 'awq-fused', weights: 'awq-int4', cacheLen: 50 }, ['kvCache', 'weights', 'cacheLen']);
  refuses({ kvCache: 'static', blockSize: 16 }, ['kvCache', 'blockSize']);
  // the fused cache rolls past its length during the decode steps: a cache shorter than the run but not the prompt is taken
  const o = planOptionsFrom({
    ...infer,
    kvCache: 'awq-fused',
    weights: 'awq-int4',
    cacheLen: 150,
    given: ['kvCache', 'weights', 'cacheLen'],
  } as typeof DEFAULT_INPUTS);
  assert.equal(o.mode === 'infer' && o.cacheLen, 150);
});

test("an AwqConfig with do_fuse plans AutoAWQ's fused cache at fuse_max_seq_len", () => {
  assert.deepEqual(readQuantizationConfig({ quant_method: 'awq', bits: 4, group_size: 128, do_fuse: true, fuse_max_seq_len: 512 }, 'c.json'), {
    weights: 'awq-int4',
    groupSize: 128,
    kvCache: 'awq-fused',
    cacheLen: 512,
  });
  assert.deepEqual(readQuantizationConfig({ quant_method: 'awq', bits: 4, group_size: 128, fuse_max_seq_len: 512 }, 'c.json'), {
    weights: 'awq-int4',
    groupSize: 128,
  });
});

test('a compressed-tensors quantization_config is read by its first weight scheme: 8-bit float fp8, 8-bit int int8, 4-bit int int4', () => {
  const ct = (weights: Record<string, unknown> | null) => ({
    quant_method: 'compressed-tensors',
    format: 'pack-quantized',
    config_groups: { group_0: { targets: ['Linear'], weights, input_activations: null } },
    ignore: ['lm_head'],
  });
  const notes: string[] = [];
  assert.deepEqual(readQuantizationConfig(ct({ num_bits: 4, type: 'int', strategy: 'group', group_size: 128 }), 'c.json', notes), { weights: 'int4' });
  assert.match(notes[0] ?? '', /compressed-tensors 4-bit int/);
  assert.deepEqual(readQuantizationConfig(ct({ num_bits: 8, type: 'float', strategy: 'channel' }), 'c.json'), { weights: 'fp8' });
  assert.deepEqual(readQuantizationConfig(ct({ num_bits: 8, type: 'int', strategy: 'channel' }), 'c.json'), { weights: 'int8' });
  const skipped: string[] = [];
  assert.equal(readQuantizationConfig(ct({ num_bits: 4, type: 'float', group_size: 16 }), 'c.json', skipped), undefined);
  assert.match(skipped[0] ?? '', /4-bit float/);
  assert.equal(readQuantizationConfig(ct(null), 'c.json', []), undefined);
});

test("--kv-cache awq-fused takes an AWQ checkpoint's weights as given; over other weights it is refused once the checkpoint is read", () => {
  const awq = { quantization: { weights: 'awq-int4' as const, groupSize: 128 } };
  const fused = { ...DEFAULT_INPUTS, mode: 'infer' as const, kvCache: 'awq-fused' as const, given: ['kvCache'] };
  // before the checkpoint is read the default weights are not refused (the CLI checks the flags first)
  assert.doesNotThrow(() => planOptionsFrom(fused as typeof DEFAULT_INPUTS));
  assert.equal(checkpointInputs(awq, fused as typeof DEFAULT_INPUTS).weights, 'awq-int4');
  assert.throws(() => checkpointInputs({ quantization: undefined }, fused as typeof DEFAULT_INPUTS), InvalidArgumentError);
  assert.throws(() => checkpointInputs({ quantization: { weights: 'nf4' } }, fused as typeof DEFAULT_INPUTS), InvalidArgumentError);
});

test('AWQ GEMM by AutoAWQ release: split-k partial outputs in 0.1.x, the whole weight dequantised to fp16 from 1024 rows in 0.2 (not under the fused MLP)', () => {
  const m = catalogueModel('mistral-7b');
  const matmul = (prompt: number, awqVersion: string | undefined, kvCache?: 'awq-fused'): number => {
    const w = servedWeights(m, inferOptions({ weights: 'awq-int4', awqVersion, kvCache, batch: 1, prompt, newTokens: 16 }));
    return w.layerMatmulBytes(prompt, true);
  };
  // the largest layer is the MLP's gate/up (4096 x 14336): 8 fp16 partial outputs of rows x 14336, or 4096 x 14336 x 2
  const splitK = (rows: number): number => 8 * rows * 14336 * 2;
  assert.equal(matmul(2048, '0.1.8'), splitK(2048));
  assert.equal(matmul(2048, '0.2.6'), 4096 * 14336 * 2);
  assert.equal(matmul(2048, undefined), 4096 * 14336 * 2, 'the newest release by default');
  assert.equal(matmul(1023, '0.2.6'), splitK(1023), 'below 1024 rows the split-k kernel runs in 0.2 too');
  assert.equal(matmul(2048, '0.2.6', 'awq-fused'), splitK(2048), 'the fused MLP calls gemm_forward_cuda itself');
  const infer = { ...DEFAULT_INPUTS, mode: 'infer' as const, prompt: 100, newTokens: 100 };
  assert.throws(() => planOptionsFrom({ ...infer, weights: 'nf4', awqVersion: '0.2.6', given: ['weights', 'awqVersion'] }), /--awq-version .*awq-int4/);
  assert.throws(
    () => planOptionsFrom({ ...infer, weights: 'awq-int4', awqVersion: '0.0.9', given: ['weights', 'awqVersion'] }),
    /--awq-version 0\.0\.9: gpumem follows AutoAWQ 0\.1\.6 to 0\.2\.9/,
  );
});
