// Prints the planner against peaks measured with PyTorch (default: fixtures/plan/measured-peaks.json, recorded by
// benchmarks/pytorch/record_training_peaks.py) as a Markdown table.
// Usage: npm run build && node tools/plan-accuracy.mjs [measured-peaks.json]   (GPUMEM_DIST: another built dist/)
import { readFileSync } from 'node:fs';
import { fromDist } from '../benchmarks/dist.mjs';
const { againstMeasured } = await fromDist('plan/measured.js');
const file = process.argv[2] ?? new URL('../fixtures/plan/measured-peaks.json', import.meta.url);
const d = JSON.parse(readFileSync(file, 'utf8'));
console.log(`Measured on ${d.device} with torch ${d.torch}, transformers ${d.transformers}; GiB = 2^30 bytes.\n`);
console.log('| run | model | precision | batch x tokens | measured peak (GiB) | planner − overhead (GiB) | error | parameters error | role |');
console.log('|---|---|---|---|---:|---:|---:|---:|---|');
for (const r of d.rows) {
  const { predictedBytes, err: e, paramErr } = againstMeasured(r);
  const err = e * 100;
  const perr = paramErr * 100;
  const shape = r.mode === 'train' ? `${r.batch} x ${r.seq}` : `${r.batch} x (${r.prompt}+${r.newTokens})`;
  console.log(
    `| ${r.mode === 'train' ? `train, AdamW${r.fusedOptimizer ? ' (fused)' : ''}${r.recompute === 'full' ? ', checkpointing' : ''}` : 'generate, KV cache'} | ${r.model} | ${r.precision ?? 'bf16 weights'} | ${shape} | ${(r.peakAllocatedBytes / 2 ** 30).toFixed(3)} | ${(predictedBytes / 2 ** 30).toFixed(3)} | ${err >= 0 ? '+' : ''}${err.toFixed(1)}% | ${perr.toFixed(2)}% | ${r.mode === 'train' && r.model === 'gpt2' ? 'fit' : 'test'} |`,
  );
}
