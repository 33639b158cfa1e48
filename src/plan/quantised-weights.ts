/**
 * The weights an inference GPU holds under a weight format: each block's linear layers (and experts) in the format's
 * layout, the rest (norms, biases, embeddings, the output layer unless the loader quantises it, a vision tower) in 16
 * bits; and what the quantisation scheme's kernels add (quant-schemes.ts): their scratch at load, and a matmul's
 * transients when a layer runs.
 */
import { awqRelease } from './engines/autoawq-releases.js';
import { linearModules } from './adapters.js';
import type { ModelConfig } from './model-config.js';
import { localParams, weightBytes } from './model-states.js';
import type { InferOptions } from './options.js';
import { countParams } from './params.js';
import { type LinearShape, type QuantScheme, quantScheme } from './quant-schemes.js';

/** The weights on the most-loaded GPU, and the scheme's buffers. */
export interface ServedWeights {
  /** Every weight here (the vision tower's included). */
  totalBytes: number;
  /** The embeddings, final norm and output layer on this pipeline stage. */
  endBytes: number;
  /** The scheme's row; undefined for a 16- or 32-bit format. */
  scheme: QuantScheme | undefined;
  groupSize: number;
  /** The output layer is quantised (a bitsandbytes loader told to convert it). */
  outputQuantised: boolean;
  /** Buffers the kernels allocate once at load. */
  scratchBytes: number;
  /** What quantising the largest quantised layer at load holds beyond the weights (0 for a checkpoint stored quantised). */
  loadBytes: number;
  /** The most one layer's matmul allocates for `rows` input rows while it runs (`first`: the first forward pass). */
  layerMatmulBytes(rows: number, first: boolean): number;
  /** The same for the output layer (0 unless it is quantised). */
  outputMatmulBytes(rows: number, first: boolean): number;
  /** What the matmul of one block's linear layer (in x out, before tensor parallelism) allocates for `rows` rows. */
  linearMatmulBytes(l: LinearShape, rows: number, first: boolean): number;
  /** The most one routed or shared expert's matmul allocates for `rows` rows of the layer. */
  expertMatmulBytes(rows: number, first: boolean): number;
}

/** One routed or shared expert's linear layers: gate and up (hidden to f), down (f to hidden). */
function mlpShapes(m: ModelConfig, f: number): LinearShape[] {
  const up = { in: m.hidden, out: f };
  return [...(m.gatedMlp ? [up, up] : [up]), { in: f, out: m.hidden }];
}

/**
 * The weights of `m` on the most-loaded GPU under `o`: the linear layers of the blocks in the format's layout, the
 * rest in 16 bits (32 under fp32).
 */
export function servedWeights(m: ModelConfig, o: InferOptions): ServedWeights {
  const c = countParams(m);
  const p = o.parallel;
  const scheme = quantScheme(o.weights);
  const perStage = m.layers / p.pp;
  const denseShare = Math.min(c.denseLayers, perStage);
  const moeShare = perStage - denseShare;
  const last = p.pp === 1 || c.lmHead + c.finalNorm >= c.embedding;
  const first = p.pp === 1 || !last;
  if (!scheme) {
    const wb = weightBytes(o.weights);
    const ends = (first ? c.embedding : 0) + (last ? c.lmHead + c.finalNorm : 0);
    return {
      totalBytes: (localParams(c, m, p) + c.extra / p.tp) * wb,
      endBytes: (ends / p.tp) * wb,
      scheme,
      groupSize: 0,
      outputQuantised: false,
      scratchBytes: 0,
      loadBytes: 0,
      layerMatmulBytes: () => 0,
      outputMatmulBytes: () => 0,
      linearMatmulBytes: () => 0,
      expertMatmulBytes: () => 0,
    };
  }
  const g = o.groupSize ?? scheme.groupSize;
  // tensor parallelism splits each linear layer: its share as one layer of in x out / tp
  const shard = (l: LinearShape): LinearShape => ({ in: l.in, out: l.out / p.tp });
  const dense = linearModules(m, false).map(shard);
  const moeAttention = m.moe ? linearModules(m, true).map(shard) : [];
  const expert = m.moe ? mlpShapes(m, m.moe.expertIntermediate).map(shard) : [];
  const shared = m.moe && m.moe.sharedExperts > 0 ? mlpShapes(m, m.moe.sharedExperts * m.moe.expertIntermediate).map(shard) : [];
  const experts = m.moe ? m.moe.experts / p.ep : 0;
  const bytes = (ls: readonly LinearShape[]): number => ls.reduce((s, l) => s + scheme.linearBytes(l, g), 0);
  const numel = (ls: readonly LinearShape[]): number => ls.reduce((s, l) => s + l.in * l.out, 0);
  const denseLayer = bytes(dense) + (c.denseLayer / p.tp - numel(dense)) * 2;
  const moeLinear = numel(moeAttention) + experts * numel(expert) + numel(shared);
  const moeLocal = (c.moeLayer - (m.moe ? m.moe.experts * (1 - 1 / p.ep) * c.expert : 0)) / p.tp;
  const moeLayer = m.moe ? bytes(moeAttention) + experts * bytes(expert) + bytes(shared) + (moeLocal - moeLinear) * 2 : 0;
  // transformers keeps the output layer (get_keys_to_not_convert, src/transformers/integrations/bitsandbytes.py at
  // v4.35); Lightning's BitsandbytesPrecision (src/lightning/fabric/plugins/precision/bitsandbytes.py at 71aed751,
  // LitGPT 982abcbc's pin) converts every nn.Linear not in ignore_modules, which LitGPT's generate leaves empty
  const outputQuantised = !!o.quantisedOutput && scheme.bitsandbytes && last && c.lmHead > 0;
  const head = shard({ in: m.hidden, out: m.vocab });
  const headBytes = outputQuantised ? scheme.linearBytes(head, g) + (c.lmHead / p.tp - numel([head])) * 2 : (c.lmHead / p.tp) * 2;
  const endBytes = ((first ? c.embedding : 0) + (last ? c.finalNorm : 0)) * (2 / p.tp) + (last ? headBytes : 0);
  const quantised = [...(denseShare > 0 ? dense : []), ...(moeShare > 0 ? [...moeAttention, ...expert, ...shared] : []), ...(outputQuantised ? [head] : [])];
  // AutoAWQ's fused MLP runs split-k itself, and at the lengths where the release dequantises the other layers, its
  // gate and up projections' partial outputs (8 x rows x intermediate x 2) are the larger: fused, split-k throughout
  const dequantFromRows = o.kvCache === 'awq-fused' ? undefined : awqRelease(o.awqVersion).dequantFromRows;
  const ctx = (rows: number, isFirst: boolean) => ({ rows, first: isFirst, computeDtype: o.computeDtype ?? 'fp32', groupSize: g, dequantFromRows });
  // a routed expert sees the rows routed to it (tokens x experts per token / experts), the other layers every row
  const routed = (rows: number): number => (m.moe ? Math.ceil((rows * m.moe.expertsPerToken) / m.moe.experts) : rows);
  const most = (ls: readonly LinearShape[], rows: number, isFirst: boolean): number =>
    Math.max(0, ...ls.map((l) => scheme.matmulBytes?.(l, ctx(rows, isFirst)) ?? 0));
  return {
    totalBytes: denseShare * denseLayer + moeShare * moeLayer + endBytes + (c.extra / p.tp) * 2,
    endBytes,
    scheme,
    groupSize: g,
    outputQuantised,
    scratchBytes: scheme.scratchBytes?.(quantised) ?? 0,
    // the largest layer is quantised while every other weight is held: an upper bound by what loads after it (the
    // checkpoint's order; at most the rest of one block)
    loadBytes: Math.max(0, ...quantised.map((l) => scheme.loadBytes?.(l, g) ?? 0)),
    layerMatmulBytes: (rows, isFirst) =>
      Math.max(
        denseShare > 0 ? most(dense, rows, isFirst) : 0,
        moeShare > 0 ? Math.max(most([...moeAttention, ...shared], rows, isFirst), most(expert, routed(rows), isFirst)) : 0,
      ),
    outputMatmulBytes: (rows, isFirst) => (outputQuantised ? most([head], rows, isFirst) : 0),
    linearMatmulBytes: (l, rows, isFirst) => most([shard(l)], rows, isFirst),
    expertMatmulBytes: (rows, isFirst) => (moeShare > 0 ? Math.max(most(shared, rows, isFirst), most(expert, routed(rows), isFirst)) : 0),
  };
}
