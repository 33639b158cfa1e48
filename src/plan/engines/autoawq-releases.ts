/**
 * AutoAWQ release by release (`--awq-version`): how its GEMM layer (WQLinear_GEMM, the one transformers' AWQ
 * integration and AutoAWQ's own models load an AWQ GEMM checkpoint into) multiplies. Read in
 * casper-hansen/AutoAWQ awq/modules/linear.py (0.1.x) and awq/modules/linear/gemm.py (0.2.x) at the tags named below.
 */
import { type EngineVersion, parseVersion, releaseRow } from './versions.js';

export interface AwqRelease {
  from: string;
  /**
   * Input rows (batch x tokens, `x.shape[0] * x.shape[1]`) from which a WQLinear_GEMM matmul dequantises its whole
   * weight to fp16 (awq_ext.dequantize_weights_cuda, in x out x 2 bytes) and calls torch.matmul instead of the split-k
   * kernel (gemm_forward_cuda with 8 fp16 partial outputs): `FP16_MATMUL_HEURISTIC_CONDITION` came with v0.2.0 (#330,
   * 2024-02-15; "Up to 60% faster context processing", #316). Undefined: split-k at every length (v0.1.x). AutoAWQ's
   * fused MLP calls gemm_forward_cuda itself for its gate and up projections (awq/modules/fused/mlp.py, split-k 8) in
   * every release.
   */
  dequantFromRows: number | undefined;
  says: string;
}

export const AUTOAWQ = { label: 'AutoAWQ', oldest: '0.1.6', newest: '0.2.9', option: '--awq-version' } as const;

export const AWQ_RELEASES: readonly AwqRelease[] = [
  { from: '0.1.6', dequantFromRows: undefined, says: 'AutoAWQ 0.1.x: split-k GEMM at every length' },
  { from: '0.2.0', dequantFromRows: 1024, says: 'AutoAWQ 0.2 on: 1024 rows or more dequantise the weight to fp16 for torch.matmul' },
];

/**
 * The AutoAWQ release an AWQ plan follows: "0.1.8" or "0.2.6"; undefined gives the newest.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export const parseAwqVersion = (text: string | undefined): EngineVersion => parseVersion(AUTOAWQ, text);

/** The row of AWQ_RELEASES that release `text` (undefined: the newest) follows. */
export const awqRelease = (text: string | undefined): AwqRelease => releaseRow(AWQ_RELEASES, parseAwqVersion(text));
