/** The inference estimate: weights by format, the KV cache, the prefill workspace. See estimate.ts. */
import { formatCount } from '../units.js';
import type { ModelConfig } from './model-config.js';
import { kvBytes, localParams, weightBytes } from './model-states.js';
import { checkParallel, fieldsOf, fieldsOver, fusedAttention, type Estimate, type InferOptions, type Line } from './options.js';
import { CONSTANTS } from './constants.js';
import { contextLines } from './overheads.js';
import { commLines } from './strategies/comm.js';
import { cachedTokenLayers, countParams, kvBytesPerTokenPerLayer } from './params.js';
import { servedWeightBytes } from './serve.js';

/** The inference estimate for the most-loaded GPU. */
export function estimateInfer(m: ModelConfig, o: InferOptions): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const P = localParams(c, m, p);
  const wb = weightBytes(o.weights);
  const parametersBytes = servedWeightBytes(m, o);
  const ctx = o.prompt + o.newTokens;
  const rounded = (t: number): number => (o.blockSize ? Math.ceil(t / o.blockSize) * o.blockSize : t);
  const blocks = rounded(ctx);
  const kvPerToken = kvBytesPerTokenPerLayer(m, kvBytes(o.kvDtype));
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const layersHere = m.layers / p.pp;
  // Hugging Face's caches keep a sliding-window layer's last window only (its sliding and hybrid caches)
  const kvAt = (tokens: number): number => (kvPerToken * o.batch * cachedTokenLayers(m, rounded(tokens), layersHere, true)) / kvSplit;
  const kvCacheBytes = kvAt(ctx);
  const e = o.weights === 'fp32' ? 4 : 2;
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  // Hugging Face repeats keys and values to every head for the attention call: one layer at a time.
  const repeatKv = (tokens: number): number => (m.kvHeads < m.heads && !m.mla ? (2 * o.batch * tokens * m.heads * m.headDim * e) / p.tp : 0);
  const logits = o.batch * m.vocab * 4;
  const fused = fusedAttention(m, o.attention, o.weights);
  const weightsLine: Line = {
    name: `weights (${o.weights})`,
    bytes: parametersBytes,
    note: `${formatCount(P)} parameters here x ${wb.toFixed(3)} bytes${wb < 2 ? ' (the embeddings and the output layer in 16 bits)' : ''}`,
    field: 'parametersBytes',
  };
  const kvLine = (tokens: number, bytes: number, name: string): Line => ({
    name,
    bytes,
    note: `${kvPerToken} bytes per token per layer${m.mla ? ' (MLA latent)' : ''} x ${layersHere} layers x ${o.batch} sequences x ${tokens} tokens${m.slidingWindow && tokens > m.slidingWindow ? ` (${m.slidingLayers === m.layers ? 'every layer' : `${m.slidingLayers} of ${m.layers} layers`} keep${m.slidingLayers === m.layers ? 's' : ''} only the last ${m.slidingWindow})` : ''}${o.blockSize ? ` (rounded to ${o.blockSize}-token blocks)` : ''}${kvSplit > 1 ? ` / ${kvSplit} (tensor parallel)` : ''}`,
    field: 'kvCacheBytes',
  });
  const logitsLine: Line = { name: 'fp32 logits', bytes: logits, note: `${o.batch} sequences x ${m.vocab} vocabulary x 4 bytes`, field: 'logitsBytes' };
  // Prefill: hidden and MLP buffers for every prompt token, the prompt's attention matrix without a fused kernel.
  const prefillTokens = o.batch * o.prompt;
  const prefill: Line[] = [
    weightsLine,
    kvLine(o.prompt, kvAt(o.prompt), `KV cache (${o.kvDtype}) during prefill: the prompt only`),
    {
      name: 'prefill activations',
      bytes: (prefillTokens * (4 * m.hidden + 3 * f) * e) / p.tp + (fused ? 0 : o.batch * (m.heads / p.tp) * o.prompt * o.prompt * 4),
      note: `hidden and MLP buffers for ${prefillTokens} prompt tokens${fused ? '' : ', the prompt attention matrix (math kernel)'}`,
      field: 'activationsBytes',
    },
    {
      name: 'keys and values repeated to every head (one layer)',
      bytes: repeatKv(o.prompt),
      note: 'Hugging Face repeats grouped key/value heads for the attention call',
      field: 'workspaceBytes',
    },
    logitsLine,
  ];
  // Last decode step: the whole cache, plus one layer's cache being copied as it grows (a contiguous cache grows by
  // concatenation; a paged cache does not), repeated heads and the logits.
  const growth = o.blockSize ? 0 : (kvPerToken * o.batch * ctx) / kvSplit;
  const decode: Line[] = [
    weightsLine,
    kvLine(blocks, kvCacheBytes, `KV cache (${o.kvDtype})`),
    {
      name: "KV cache growth: one layer's cache copied",
      bytes: growth,
      note: 'a contiguous cache grows by concatenation at every step',
      field: 'workspaceBytes',
    },
    {
      name: 'keys and values repeated to every head (one layer)',
      bytes: repeatKv(ctx),
      note: 'Hugging Face repeats grouped key/value heads for the attention call',
      field: 'workspaceBytes',
    },
    logitsLine,
  ];
  const sum = (ls: Line[]): number => ls.reduce((a, l) => a + l.bytes, 0);
  const atDecode = sum(decode) >= sum(prefill);
  const peakLines = (atDecode ? decode : prefill).filter((l) => l.bytes > 0);
  const otherLines = (atDecode ? prefill : decode).filter((l) => l.bytes > 0);
  const share = o.fragmentation ?? CONSTANTS.fragmentationShare.value;
  const over: Line[] = [
    ...contextLines(o),
    ...commLines(p.gpus),
    {
      name: 'fragmentation allowance',
      bytes: Math.round(sum(peakLines) * share),
      note: `${Math.round(share * 100)}% of the estimate for the caching allocator's split blocks (gpumem pool replay measures yours)`,
      field: 'overheadBytes',
      cached: true,
    },
  ];
  const lines = [...peakLines, ...over];
  const fields = fieldsOver([prefill, decode], over);
  return {
    ...fields,
    totalBytes: Math.round(fields.totalBytes),
    sumBytes: Math.round(fields.totalBytes),
    peakPhase: 'inference',
    lines,
    atPeak: fieldsOf(lines),
    otherMoment: { phase: atDecode ? 'prefill' : 'decode', bytes: sum(otherLines), lines: otherLines },
    modelStates: { parametersBytes, gradientsBytes: 0, optimizerBytes: 0 },
    hostBytes: 0,
    hostParametersBytes: 0,
    hostOptimizerBytes: 0,
    offloadBytesPerStep: 0,
    params: c,
    localParams: P,
    allocatedPeakBytes: sum(peakLines),
    reservedPeakBytes: sum(peakLines) + (over[over.length - 1] as Line).bytes,
  };
}
