/** `gpumem plan`: options to a plan, printed. Loads no GPU library. */
import { existsSync, writeFileSync } from 'node:fs';
import { catalogueModel } from '../plan/catalogue.js';
import type { InferOptions, Parallelism, TrainOptions } from '../plan/estimate.js';
import { readConfigFile } from '../plan/model-config.js';
import { machineFromBench, machineFromCatalogue, plan } from '../plan/plan.js';
import { renderPlanHtml, renderPlanText } from '../report/plan-render.js';
import type { Io } from './commands.js';
import { UsageError } from './usage-error.js';

export async function runPlan(opts: Record<string, unknown>, io: Io): Promise<void> {
  const modelArg = String(opts.model);
  const model = modelArg.endsWith('.json') || existsSync(modelArg) ? readConfigFile(modelArg) : catalogueModel(modelArg);
  if (opts.gpu && opts.fromBench) throw new UsageError('give --gpu or --from-bench, not both');
  const machine = opts.fromBench ? machineFromBench(String(opts.fromBench)) : machineFromCatalogue(String(opts.gpu ?? 'h200'));
  if (opts.hostMemory !== undefined) machine.hostMemoryBytes = opts.hostMemory as number;
  const zero = opts.fsdp ? 3 : (Number(opts.zero) as 0 | 1 | 2 | 3);
  const pp = opts.pp as number;
  const parallel: Parallelism = {
    gpus: opts.gpus as number,
    nodes: opts.nodes as number,
    zero,
    tp: opts.tp as number,
    sp: !!opts.sp,
    pp,
    ep: opts.ep as number,
    inFlight: (opts.inFlight as number | undefined) ?? pp,
  };
  const fragmentation = opts.fragmentation as number;
  let options: TrainOptions | InferOptions;
  if (opts.mode === 'train') {
    options = {
      mode: 'train',
      precision: opts.precision as TrainOptions['precision'],
      optimizer: opts.optimizer as TrainOptions['optimizer'],
      fusedOptimizer: !!opts.fusedOptimizer,
      batch: opts.batch as number,
      seq: opts.seq as number,
      gradAccum: opts.gradAccum as number,
      recompute: opts.recompute as TrainOptions['recompute'],
      flashAttention: !!opts.flashAttention,
      framework: opts.framework as TrainOptions['framework'],
      parallel,
      offload: opts.offload as TrainOptions['offload'],
      fragmentation,
    };
  } else {
    let prompt = opts.prompt as number;
    const newTokens = opts.newTokens as number;
    if (opts.context !== undefined) {
      const ctx = opts.context as number;
      if (ctx <= newTokens) throw new UsageError(`--context ${ctx} must exceed --new-tokens ${newTokens}`);
      prompt = ctx - newTokens;
    }
    options = {
      mode: 'infer',
      batch: opts.batch as number,
      prompt,
      newTokens,
      kvDtype: opts.kvDtype as InferOptions['kvDtype'],
      blockSize: opts.blockSize as number | undefined,
      weights: opts.weights as InferOptions['weights'],
      flashAttention: true,
      parallel,
      fragmentation,
    };
  }
  const result = plan(model, options, machine);
  if (opts.html) {
    writeFileSync(String(opts.html), renderPlanHtml(result));
    io.err(`wrote ${String(opts.html)}\n`);
  }
  io.out(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${renderPlanText(result)}\n`);
}
