// Prints the planner against peaks measured with PyTorch (default: fixtures/plan/measured-peaks.json, recorded by
// benchmarks/pytorch/record_training_peaks.py) as a Markdown table.
// Usage: npm run build && node tools/plan-accuracy.mjs [measured-peaks.json]   (GPUMEM_DIST: another built dist/)
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const dist = process.env.GPUMEM_DIST ? pathToFileURL(`${process.env.GPUMEM_DIST}/`) : new URL('../dist/', import.meta.url);
const { normaliseConfig } = await import(new URL('plan/model-config.js', dist).href);
const { estimate } = await import(new URL('plan/estimate.js', dist).href);
const file = process.argv[2] ?? new URL('../fixtures/plan/measured-peaks.json', import.meta.url);
const d = JSON.parse(readFileSync(file, 'utf8'));
const par = { gpus: 1, nodes: 1, zero: 0, tp: 1, sp: false, pp: 1, ep: 1, inFlight: 1 };
console.log(`Measured on ${d.device} with torch ${d.torch}, transformers ${d.transformers}; GiB = 2^30 bytes.\n`);
console.log('| run | model | precision | batch x tokens | measured peak (GiB) | planner − overhead (GiB) | error | parameters error | role |');
console.log('|---|---|---|---|---:|---:|---:|---:|---|');
for (const r of d.rows) {
  const m = normaliseConfig(r.config, 'fixture', r.model);
  const o =
    r.mode === 'train'
      ? {
          mode: 'train',
          precision: r.precision,
          optimizer: 'adamw',
          fusedOptimizer: r.fusedOptimizer ?? false,
          batch: r.batch,
          seq: r.seq,
          gradAccum: 1,
          recompute: r.recompute ?? 'none',
          attention: r.attention ?? 'sdpa',
          framework: 'pytorch',
          parallel: par,
          offload: 'none',
          fragmentation: 0.05,
        }
      : {
          mode: 'infer',
          batch: r.batch,
          prompt: r.prompt,
          newTokens: r.newTokens,
          kvDtype: 'bf16',
          blockSize: undefined,
          weights: 'bf16',
          attention: r.attention ?? 'sdpa',
          engine: 'hf',
          parallel: par,
          fragmentation: 0.05,
        };
  const e = estimate(m, o);
  const pred = e.totalBytes - e.overheadBytes;
  const err = (pred / r.peakAllocatedBytes - 1) * 100;
  const perr = ((e.localParams * (r.mode === 'train' && r.precision !== 'bf16-pure' ? 4 : 2)) / r.parameterBytes - 1) * 100;
  const shape = r.mode === 'train' ? `${r.batch} x ${r.seq}` : `${r.batch} x (${r.prompt}+${r.newTokens})`;
  console.log(
    `| ${r.mode === 'train' ? `train, AdamW${r.fusedOptimizer ? ' (fused)' : ''}${r.recompute === 'full' ? ', checkpointing' : ''}` : 'generate, KV cache'} | ${r.model} | ${r.precision ?? 'bf16 weights'} | ${shape} | ${(r.peakAllocatedBytes / 2 ** 30).toFixed(3)} | ${(pred / 2 ** 30).toFixed(3)} | ${err >= 0 ? '+' : ''}${err.toFixed(1)}% | ${perr.toFixed(2)}% | ${r.mode === 'train' && r.model === 'gpt2' ? 'fit' : 'test'} |`,
  );
}
