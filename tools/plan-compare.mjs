// Every figure `gpumem plan` prints, before and after a change: a corpus of command lines (every catalogue model in
// the common modes, the options one at a time and combined on a handful of families, every row of the accuracy
// sets) run through two builds, and the figures that moved by more than a threshold listed with both values.
//
// Usage: node tools/plan-compare.mjs --before <dist> [--after <dist>] [--threshold 0.005] [--json]
//   --before: a built dist/ of the earlier commit (git worktree add /tmp/before <rev> && (cd /tmp/before && npm ci &&
//   npm run build)); --after: default this checkout's dist/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadSets, runPlanWith } from './plan-accuracy.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const before = opt('--before');
const after = opt('--after', new URL('../dist', import.meta.url).pathname);
const threshold = Number(opt('--threshold', '0.005'));
if (!before) {
  console.error('usage: node tools/plan-compare.mjs --before <dist> [--after <dist>] [--threshold 0.005] [--json]');
  process.exit(2);
}

/** The command lines of the corpus: [model, flags]. */
async function corpus(configDir) {
  const { MODEL_CONFIGS } = await import(pathToFileURL(join(resolve(before), 'plan/catalogue.js')).href);
  const runs = [];
  const common = [
    [],
    ['--recompute', 'full'],
    ['--lora', '16'],
    ['--lora', '16', '--base-weights', 'nf4', '--recompute', 'full'],
    ['--precision', 'bf16-pure', '--batch', '4', '--seq', '1024'],
    ['--mode', 'infer'],
    ['--mode', 'infer', '--batch', '16', '--context', '8192'],
    ['--mode', 'infer', '--engine', 'vllm'],
    ['--mode', 'infer', '--engine', 'sglang'],
  ];
  for (const m of Object.keys(MODEL_CONFIGS)) for (const f of common) runs.push([m, f]);
  const variety = [
    ['--precision', 'fp32'],
    ['--precision', 'bf16'],
    ['--precision', 'fp8'],
    ['--precision', 'fp8-torchao'],
    ['--attention', 'eager', '--seq', '1024'],
    ['--flash-attention', '--precision', 'fp32'],
    ['--recompute', 'selective'],
    ['--recompute', 'op'],
    ['--compile'],
    ['--compile', 'blocks'],
    ['--compile', '--recompute', 'full'],
    ['--compile', '--recompute', 'op'],
    ['--compile', 'blocks', '--recompute', 'op'],
    ['--loss', 'chunked'],
    ['--loss', 'fused'],
    ['--optimizer', 'adamw8bit'],
    ['--optimizer', 'paged-adamw8bit'],
    ['--optimizer', 'sgd'],
    ['--fused-optimizer'],
    ['--optimizer-in-backward'],
    ['--activation-offload'],
    ['--grad-accum', '4'],
    ['--batch', '8', '--seq', '512'],
    ['--offload', 'optimizer'],
    ['--offload', 'params'],
    ['--gpus', '8', '--zero', '1'],
    ['--gpus', '8', '--zero', '2'],
    ['--gpus', '8', '--zero', '3'],
    ['--gpus', '8', '--fsdp'],
    ['--gpus', '8', '--fsdp', '--grad-accum', '2'],
    ['--gpus', '8', '--tp', '4', '--sp'],
    ['--gpus', '8', '--tp', '2', '--pp', '2'],
    ['--framework', 'megatron', '--precision', 'bf16', '--gpus', '8', '--tp', '4', '--zero', '1'],
    ['--framework', 'megatron', '--precision', 'bf16', '--recompute', 'selective'],
    ['--framework', 'litgpt', '--lora', '8', '--precision', 'bf16-pure'],
    ['--framework', 'litgpt', '--lora', '8', '--precision', 'bf16-pure', '--base-weights', 'nf4'],
    ['--lora', '16', '--lora-targets', 'all-linear'],
    ['--lora', '16', '--lora-targets', 'all-linear', '--lora-dropout', '0.05'],
    ['--lora', '16', '--dora'],
    ['--lora', '16', '--lora-dtype', 'bf16', '--precision', 'bf16-pure'],
    ['--lora', '16', '--base-weights', 'nf4', '--double-quant', '--lora-targets', 'all-linear'],
    ['--lora', '16', '--base-weights', 'nf4', '--bnb-version', '0.42'],
    ['--lora', '16', '--base-weights', 'int8'],
    ['--lora', '16', '--base-weights', 'fp32'],
    ['--lora', '16', '--compile'],
    ['--lora', '16', '--recompute', 'full', '--compile'],
    ['--mode', 'infer', '--weights', 'int4', '--kv-dtype', 'fp8'],
    ['--mode', 'infer', '--attention', 'eager', '--prompt', '2048'],
    ['--mode', 'infer', '--flash-attention', '--weights', 'fp32', '--prompt', '8192'],
    ['--mode', 'infer', '--block-size', '16', '--batch', '8'],
    ['--mode', 'infer', '--gpus', '4', '--tp', '4', '--batch', '32'],
    ['--mode', 'infer', '--engine', 'vllm', '--engine-version', '0.6'],
    ['--mode', 'infer', '--engine', 'vllm', '--engine-version', '0.7'],
    ['--mode', 'infer', '--engine', 'vllm', '--engine-version', '0.8'],
    ['--mode', 'infer', '--engine', 'vllm', '--engine-version', '0.10'],
    ['--mode', 'infer', '--engine', 'vllm', '--gpus', '2', '--tp', '2', '--max-model-len', '8192'],
    ['--mode', 'infer', '--engine', 'vllm', '--enforce-eager', '--gpu-memory-utilization', '0.8'],
    ['--mode', 'infer', '--engine', 'sglang', '--engine-version', '0.4.3'],
    ['--mode', 'infer', '--engine', 'sglang', '--gpus', '4', '--tp', '4'],
  ];
  for (const m of [
    'llama-3.1-8b',
    'mixtral-8x7b',
    'gemma-2-9b',
    'qwen3-8b',
    'gpt-2-medium',
    'falcon-7b',
    'phi-2',
    'deepseek-v2-lite',
    'qwen3-30b-a3b',
    'olmo-2-7b',
  ])
    for (const f of variety) runs.push([m, f]);
  for (const s of await loadSets([], configDir)) for (const r of s.rows) runs.push([r.model, r.flags, r.id]);
  return runs;
}

async function runner(dist) {
  const { main } = await import(pathToFileURL(join(resolve(dist), 'cli/program.js')).href);
  return async (model, flags) => {
    const r = await runPlanWith(main, model, flags);
    if (r.refusal !== undefined) return r;
    const p = r.plan;
    const figures = {
      total: p.perGpu.totalBytes,
      allocated: p.perGpu.allocatedPeakBytes,
      reserved: p.perGpu.reservedPeakBytes,
    };
    if (p.serving) figures.kvTokens = p.serving.kvTokens;
    if (p.largest?.batch !== undefined) figures.largestBatch = p.largest.batch;
    if (p.largest?.seq !== undefined) figures.largestSeq = p.largest.seq;
    if (p.largest?.context !== undefined) figures.largestContext = p.largest.context;
    return { figures };
  };
}

const configDir = mkdtempSync(join(tmpdir(), 'gpumem-plan-compare-'));
try {
  const runs = await corpus(configDir);
  const [a, b] = [await runner(before), await runner(after)];
  const changed = [];
  let same = 0;
  for (const [model, flags, id] of runs) {
    const x = await a(model, flags);
    const y = await b(model, flags);
    const name = `${id ?? model} ${flags.join(' ')}`.trim();
    if (x.refusal || y.refusal) {
      if ((x.refusal ?? '') !== (y.refusal ?? '')) changed.push({ run: name, before: x.refusal ?? 'planned', after: y.refusal ?? 'planned' });
      else same++;
      continue;
    }
    let moved = false;
    for (const k of Object.keys(x.figures)) {
      const v0 = x.figures[k];
      const v1 = y.figures[k];
      const rel = v1 === undefined ? Infinity : v0 === 0 ? (v1 === 0 ? 0 : Infinity) : v1 / v0 - 1;
      if (Math.abs(rel) > threshold) {
        moved = true;
        changed.push({ run: name, figure: k, before: v0, after: v1, change: rel });
      }
    }
    if (!moved) same++;
  }
  if (args.includes('--json')) console.log(JSON.stringify({ runs: runs.length, same, changed }, null, 1));
  else {
    console.log(`${runs.length} command lines; ${same} with every figure within ${(threshold * 100).toFixed(1)}%; ${changed.length} figures moved`);
    const gib = (v) => (typeof v === 'number' && v > 1e6 ? `${(v / 2 ** 30).toFixed(2)} GiB` : String(v));
    for (const c of changed)
      console.log(
        `${c.run} | ${c.figure ?? 'refusal'} | ${gib(c.before)} -> ${gib(c.after)}${c.change !== undefined ? ` (${c.change >= 0 ? '+' : ''}${(c.change * 100).toFixed(1)}%)` : ''}`,
      );
  }
} finally {
  rmSync(configDir, { recursive: true, force: true });
}
