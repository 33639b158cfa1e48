/**
 * Re-planning a candidate on the planner's fast path: the inputs through the one validator (planOptionsFrom), the
 * estimate without replaying the step through the allocator (the share the replay found for the plan as asked is
 * set aside instead), and whether it fits: under the capacity (training, generate) or starting (vLLM, SGLang).
 */
import { InvalidArgumentError } from '../../errors.js';
import { estimate } from '../estimate.js';
import { planOptionsFrom } from '../inputs.js';
import type { ModelConfig } from '../model-config.js';
import type { Estimate, PlanOptions } from '../options.js';
import type { Machine } from '../plan.js';
import type { PlanInputs } from '../schema.js';

export interface Evaluated {
  options: PlanOptions;
  estimate: Estimate;
  /** What the GPU must hold: the peak (training, generate) or what a serving engine needs to start. */
  bytesPerGpu: number;
  fits: boolean;
}

/** The estimate's view of a machine (as plan.ts gives it). */
const deviceOf = (mc: Machine) => ({ name: mc.name, capacityBytes: mc.capacityBytes, nvlink: (mc.peerGBps ?? 0) > mc.hostLinkGBps });

/** The options of inputs, or undefined where the validator refuses them (a change that contradicts the others). */
export function optionsOrUndefined(i: PlanInputs): PlanOptions | undefined {
  try {
    return planOptionsFrom(i);
  } catch (err) {
    if (err instanceof InvalidArgumentError) return undefined;
    throw err;
  }
}

/**
 * What decides most of the caching allocator's idle reserve: which tensors the step frees and when (the optimizer,
 * its step, the precision, offloading, adapters). Candidates alike in these share one replay's figure.
 */
const replayKey = (o: PlanOptions): string =>
  o.mode === 'train' ? [o.optimizer, o.fusedOptimizer, !!o.optimizerInBackward, o.precision, o.offload, !!o.lora, o.parallel.zero > 0].join('|') : '';

/** The share of the allocated peak the allocator's replay reserves without tensors, for an estimate replayed. */
export const reservedShare = (e: Estimate): number => e.lines.filter((l) => l.cached).reduce((a, l) => a + l.bytes, 0) / Math.max(1, e.allocatedPeakBytes);

/**
 * A planner over inputs on one machine. Training sets aside the share of its peak that the caching allocator
 * reserves without tensors, as one replay found it for candidates alike (replayKey), instead of replaying each.
 * The function returns undefined for inputs refused or a layout the model does not divide.
 */
export function evaluator(m: ModelConfig, mc: Machine): Evaluator {
  const shares = new Map<string, number>();
  const shareOf = (o: PlanOptions): number => {
    const k = replayKey(o);
    if (!shares.has(k)) shares.set(k, reservedShare(estimate(m, o, deviceOf(mc))));
    return shares.get(k)!;
  };
  const run = (o: PlanOptions, share: () => number | undefined): Evaluated | undefined => {
    let e: Estimate;
    try {
      const f = share();
      e = estimate(m, f === undefined ? o : { ...o, fragmentation: f }, deviceOf(mc));
    } catch (err) {
      if (err instanceof InvalidArgumentError) return undefined;
      throw err;
    }
    if (mc.hostMemoryBytes !== undefined && e.hostBytes > mc.hostMemoryBytes) return undefined;
    const s = e.serving;
    if (s) {
      // what the engine needs to start: the GPU less the cache it sized, plus one request of max_model_len
      const need = mc.capacityBytes - s.kvCacheBytes + s.maxModelLen * s.kvBytesPerToken;
      return { options: o, estimate: e, bytesPerGpu: Math.round(need), fits: s.starts };
    }
    const bytes = e.lines.reduce((a, l) => a + Math.round(l.bytes), 0);
    return { options: o, estimate: e, bytesPerGpu: bytes, fits: bytes <= mc.capacityBytes };
  };
  const trained = (o: PlanOptions): boolean => o.mode === 'train' && o.fragmentation === undefined;
  const screen = (i: PlanInputs): Evaluated | undefined => {
    const o = optionsOrUndefined(i);
    return o && run(o, () => (trained(o) ? 0 : undefined));
  };
  const evaluate = (i: PlanInputs): Evaluated | undefined => {
    const o = optionsOrUndefined(i);
    if (!o) return undefined;
    if (!trained(o)) return run(o, () => undefined);
    // screened first: what does not fit with no idle reserve at all does not fit, and costs no replay
    const floor = run(o, () => 0);
    return floor?.fits ? run(o, () => shareOf(o)) : floor;
  };
  return Object.assign(evaluate, { screen });
}

/**
 * The fast path: a candidate's plan with the replay's reserve of candidates alike; `screen` a lower bound with no
 * idle reserve at all (no replay): what it finds too large is too large.
 */
export type Evaluator = ((i: PlanInputs) => Evaluated | undefined) & { screen?: (i: PlanInputs) => Evaluated | undefined };
