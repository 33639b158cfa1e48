/** The text rendering of `gpumem plan` (the page is plan-page.ts). GiB (2^30) and GB (1e9) are always labelled. */
import type { PlanResult } from '../plan/plan.js';
import { formatCount } from '../units.js';
import { table } from './text.js';
import { wrapLine } from './width.js';

const gib = (b: number): string => (b / 2 ** 30).toFixed(2);
const gb = (b: number): string => (b / 1e9).toFixed(2);

function describe(r: PlanResult): string {
  const o = r.options;
  const p = o.parallel;
  const par = [
    `${p.gpus} GPU${p.gpus > 1 ? 's' : ''}${p.nodes > 1 ? ` on ${p.nodes} nodes` : ''}`,
    p.tp > 1 ? `TP ${p.tp}${p.sp ? '+SP' : ''}` : '',
    p.pp > 1 ? `PP ${p.pp}` : '',
    p.ep > 1 ? `EP ${p.ep}` : '',
    o.mode === 'train' && p.zero > 0 ? `ZeRO-${p.zero}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  if (o.mode === 'train') {
    const l = o.lora;
    const adapters = l
      ? `LoRA r=${l.rank} on ${typeof l.targets === 'string' ? (l.targets === 'default' ? "PEFT's default modules" : l.targets) : l.targets.join(',')}${l.dora ? ' (DoRA)' : ''}, ${l.base} base${l.doubleQuant ? ' (double quantisation)' : ''}, `
      : '';
    const savers = [
      o.optimizerInBackward ? 'optimizer in backward' : '',
      o.activationOffload ? 'activation offloading' : '',
      o.loss && o.loss !== 'standard' ? `${o.loss} loss` : '',
    ].filter(Boolean);
    return `training, ${adapters}${o.precision}, ${o.optimizer}${o.fusedOptimizer ? ' (fused)' : ''}${savers.length ? `, ${savers.join(', ')}` : ''}, micro-batch ${o.batch} x ${o.seq} tokens${o.gradAccum > 1 ? `, ${o.gradAccum} accumulation steps` : ''}, recompute ${o.recompute}, ${o.attention} attention, ${o.framework}${o.offload !== 'none' ? `, offload ${o.offload}` : ''}; ${par}`;
  }
  if (o.engine !== 'hf') return `serving with ${o.engine}, ${o.weights} weights, ${o.kvDtype} KV cache; ${par}`;
  return `inference, ${o.weights} weights, ${o.kvCache === 'awq-fused' ? 'fp16' : o.kvDtype} KV cache${o.blockSize ? ` in ${o.blockSize}-token blocks` : ''}${o.kvCache && o.kvCache !== 'dynamic' ? ` (${o.kvCache}, made at ${o.cacheLen ?? o.prompt + o.newTokens} tokens)` : ''}, batch ${o.batch}, ${o.prompt} prompt + ${o.newTokens} new tokens; ${par}`;
}

/** A command to copy, broken at spaces with a shell's line continuation where it is wider than the width. */
function commandLines(command: string, width: number | undefined): string {
  const lines = [`     $ ${command}`];
  if (width === undefined) return lines[0]!;
  const words = command.split(' ');
  lines.length = 0;
  let cur = '     $';
  for (const w of words) {
    if (cur.length + 1 + w.length + 2 > width && cur.trim() !== '$') {
      lines.push(`${cur} \\`);
      cur = '       ';
    }
    cur += `${cur.endsWith(' ') ? '' : ' '}${w}`;
  }
  lines.push(cur);
  return lines.join('\n');
}

/**
 * The plan as text. With a `width` (the terminal's), prose wraps and, where the table of lines with its "how" column
 * would be wider, the table keeps the figures and each line's "how" follows it, wrapped.
 */
export function renderPlanText(r: PlanResult, options: { width?: number } = {}): string {
  const width = options.width;
  const out: string[] = [];
  out.push(
    `gpumem plan: ${r.model.name} (${formatCount(r.model.parameters)} parameters${r.model.activeParameters !== r.model.parameters ? `, ${formatCount(r.model.activeParameters)} active per token` : ''})`,
  );
  out.push(`  ${describe(r)}`);
  out.push(`machine: ${r.machine.name}, ${gib(r.capacityBytes)} GiB (${gb(r.capacityBytes)} GB) per GPU  [${r.machine.capacitySource}]`);
  out.push('');
  out.push('most-loaded GPU:');
  const rows = [
    ...r.lines.map((l) => [l.name, gib(l.bytes), gb(l.bytes), l.note]),
    [
      'total (peak of the step + overhead)',
      gib(r.perGpu.totalBytes),
      gb(r.perGpu.totalBytes),
      r.options.mode === 'train' ? `peak in the ${r.peakPhase === 'backward' ? 'backward pass' : 'optimizer step'}` : '',
    ],
    ['capacity', gib(r.capacityBytes), gb(r.capacityBytes), r.machine.capacitySource],
  ];
  const full = table(['line', '>GiB', '>GB', 'how'], rows);
  if (width === undefined || full.split('\n').every((l) => l.length <= width)) out.push(full);
  else {
    out.push(
      table(
        ['line', '>GiB', '>GB'],
        rows.map((x) => x.slice(0, 3)),
      ),
    );
    out.push('', 'how each line is counted:');
    for (const x of rows) if (x[3]) out.push(`  ${x[0]}: ${x[3]}`);
  }
  out.push(
    `PyTorch would report: max_memory_allocated ${gib(r.perGpu.allocatedPeakBytes)} GiB (tensors), max_memory_reserved ${gib(r.perGpu.reservedPeakBytes)} GiB (with the caching allocator's fragmentation); the device peak above adds the context${r.options.parallel.gpus > 1 ? ' and communication buffers' : ''}`,
  );
  out.push('');
  const s = r.serving;
  if (s) {
    out.push(
      `${s.engine}: GPU KV cache size: ${s.kvTokens} tokens (${s.kvBlocks} blocks of ${s.blockSize}); maximum concurrency for ${s.maxModelLen} tokens per request: ${s.maxConcurrency.toFixed(2)}x`,
    );
    out.push(s.starts ? 'starts: yes' : `starts: NO: one request of ${s.maxModelLen} tokens does not fit in the KV cache`);
  } else
    out.push(
      r.fits
        ? `fits: yes, ${gib(r.marginBytes)} GiB (${gb(r.marginBytes)} GB) to spare`
        : `fits: NO, ${gib(-r.marginBytes)} GiB (${gb(-r.marginBytes)} GB) short`,
    );
  out.push('');
  out.push('placement:');
  for (const p of r.placement)
    out.push(
      `  ${p.part.padEnd(18)} ${p.location.padEnd(12)} ${gib(p.bytes).padStart(9)} GiB  ${p.why}${p.secondsPerStep !== undefined ? `; costs ${(p.secondsPerStep * 1000).toFixed(0)} ms per step at ${r.machine.hostLinkGBps} GB/s (${r.machine.hostLinkSource})` : ''}`,
    );
  if (r.suggestions.length) {
    out.push('');
    out.push('the cheapest changes that make it fit (the Pareto set of memory against cost, cheapest first):');
    r.suggestions.forEach((s, k) => {
      out.push(
        `  ${k + 1}. ${s.flags.join(' ')}: ${gib(s.bytesPerGpu)} GiB (${gb(s.bytesPerGpu)} GB), ${gib(s.headroomBytes)} GiB to spare; cost ${(s.cost * 100).toFixed(1)}%`,
      );
      out.push(`     ${s.reason}`);
      out.push(commandLines(s.command, width));
    });
  }
  if (r.fit) out.push('', `--fit ${r.fit.target}: the largest that fits is ${r.fit.input}=${r.fit.value}; the plan above is at it`);
  const l = r.largest;
  const parts: string[] = [];
  if (l.batch !== undefined) parts.push(`${r.options.mode === 'train' ? 'micro-batch' : 'batch'} ${l.batch}`);
  if (l.seq !== undefined) parts.push(`sequence length ${l.seq}`);
  if (l.context !== undefined) parts.push(`context ${l.context} tokens`);
  out.push('');
  out.push(parts.length ? `largest that fits (one at a time, the rest as given): ${parts.join('; ')}` : 'nothing fits on this GPU even at batch 1');
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.map((l) => (width === undefined || l.includes('\n') ? l : wrapLine(l, width, l.startsWith('  ') ? '      ' : '  ').join('\n'))).join('\n');
}
