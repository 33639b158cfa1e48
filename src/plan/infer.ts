/** The inference estimate: weights by format, the KV cache, the prefill workspace. See estimate.ts. */
import { formatCount } from '../units.js';
import type { ModelConfig } from './model-config.js';
import { kvBytes, localParams, weightBytes } from './model-states.js';
import { checkParallel, type Estimate, type InferOptions, type Line } from './options.js';
import { overheads } from './overheads.js';
import { countParams, kvBytesPerTokenPerLayer } from './params.js';

/** The inference estimate for the most-loaded GPU. */
export function estimateInfer(m: ModelConfig, o: InferOptions): Estimate {
  checkParallel(m, o.parallel);
  const p = o.parallel;
  const c = countParams(m);
  const P = localParams(c, m, p);
  const wb = weightBytes(o.weights);
  const parametersBytes = P * wb;
  const ctx = o.prompt + o.newTokens;
  const cached = Math.min(ctx, m.slidingWindow ?? ctx);
  const blocks = o.blockSize ? Math.ceil(cached / o.blockSize) * o.blockSize : cached;
  const kvPerToken = kvBytesPerTokenPerLayer(m, kvBytes(o.kvDtype));
  const kvSplit = m.mla ? 1 : Math.min(p.tp, m.kvHeads);
  const layersHere = m.layers / p.pp;
  const kvCacheBytes = (kvPerToken * layersHere * o.batch * blocks) / kvSplit;
  const e = o.weights === 'fp32' ? 4 : 2;
  const f = m.moe ? (m.moe.expertsPerToken + m.moe.sharedExperts) * m.moe.expertIntermediate : m.intermediate;
  const kvAt = (tokens: number): number => {
    const t = Math.min(tokens, m.slidingWindow ?? tokens);
    return (kvPerToken * layersHere * o.batch * (o.blockSize ? Math.ceil(t / o.blockSize) * o.blockSize : t)) / kvSplit;
  };
  // Hugging Face repeats keys and values to every head for the attention call: one layer at a time.
  const repeatKv = (tokens: number): number => (m.kvHeads < m.heads && !m.mla ? (2 * o.batch * tokens * m.heads * m.headDim * e) / p.tp : 0);
  const logits = o.batch * m.vocab * 4;
  // Prefill: hidden and MLP buffers for every prompt token, the prompt's attention matrix without a fused kernel.
  const prefillTokens = o.batch * o.prompt;
  const prefillWork =
    (prefillTokens * (4 * m.hidden + 3 * f) * e) / p.tp +
    repeatKv(o.prompt) +
    (o.flashAttention ? 0 : o.batch * (m.heads / p.tp) * o.prompt * o.prompt * 4) +
    logits;
  const prefillPeak = kvAt(o.prompt) + prefillWork;
  // Last decode step: the whole cache, plus one layer's cache being copied as it grows (a contiguous cache grows by
  // concatenation; a paged cache does not), repeated heads and the logits.
  const growth = o.blockSize ? 0 : kvAt(ctx) / layersHere;
  const decodeWork = growth + repeatKv(ctx) + logits;
  const decodePeak = kvCacheBytes + decodeWork;
  const atDecode = decodePeak >= prefillPeak;
  const workspace = atDecode ? decodeWork : prefillWork;
  const kvHeld = atDecode ? kvCacheBytes : kvAt(o.prompt);
  const lines: Line[] = [
    { name: `weights (${o.weights})`, bytes: parametersBytes, note: `${formatCount(P)} parameters here x ${wb.toFixed(3)} bytes` },
    {
      name: atDecode ? `KV cache (${o.kvDtype})` : `KV cache (${o.kvDtype}) during prefill: the prompt only`,
      bytes: kvHeld,
      note: `${kvPerToken} bytes per token per layer${m.mla ? ' (MLA latent)' : ''} x ${layersHere} layers x ${o.batch} sequences x ${atDecode ? blocks : o.prompt} tokens${m.slidingWindow && ctx > m.slidingWindow ? ` (sliding window ${m.slidingWindow})` : ''}${o.blockSize ? ` (rounded to ${o.blockSize}-token blocks)` : ''}${kvSplit > 1 ? ` / ${kvSplit} (tensor parallel)` : ''}`,
    },
    atDecode
      ? {
          name: 'decode workspace',
          bytes: workspace,
          note: `at the last step: ${growth ? "one layer's cache copied as it grows, " : ''}${repeatKv(ctx) ? 'keys and values repeated to every head for one layer, ' : ''}fp32 logits`,
        }
      : {
          name: 'prefill workspace',
          bytes: workspace,
          note: `hidden and MLP buffers for ${prefillTokens} prompt tokens${o.flashAttention ? '' : ', the prompt attention matrix (math kernel)'}, fp32 logits`,
        },
  ];
  // The JSON's kvCacheBytes is the cache at full context (what it reaches); the lines follow the peak's moment.
  const kvReported = kvCacheBytes;
  void kvHeld;
  const peak = parametersBytes + Math.max(decodePeak, prefillPeak);
  const over = overheads(o, P, wb, Math.max(c.denseLayer, c.moeLayer) / p.tp, peak);
  const overheadBytes = over.reduce((a, l) => a + l.bytes, 0);
  lines.push(...over);
  return {
    parametersBytes,
    gradientsBytes: 0,
    optimizerBytes: 0,
    activationsBytes: workspace,
    kvCacheBytes: kvReported,
    overheadBytes,
    totalBytes: Math.round(peak + overheadBytes),
    sumBytes: Math.round(peak + overheadBytes),
    peakPhase: 'inference',
    hostBytes: 0,
    hostParametersBytes: 0,
    hostOptimizerBytes: 0,
    offloadBytesPerStep: 0,
    lines,
    params: c,
    localParams: P,
  };
}
