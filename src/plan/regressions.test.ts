/**
 * Two defects of the planner before its options were declared once: `--flash-attention` dropped in inference, and the
 * public `estimate()` ignoring the serving engine. Each test fails on the code before the schema.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catalogueModel } from './catalogue.js';
import { estimate } from './estimate.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import { machineFromCatalogue, type PlanResult, plan } from './plan.js';
import { runCli } from '../testing/harness.js';

const infer = (i: Partial<PlanInputs>) => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer', ...i });

test('--flash-attention counts in inference, as --attention flash does: an 8k fp32 prompt keeps no attention matrix', async () => {
  const total = async (...flags: string[]): Promise<number> => {
    const r = await runCli(['plan', '--model', 'llama-3-8b', '--mode', 'infer', '--weights', 'fp32', '--prompt', '8192', ...flags, '--json']);
    assert.equal(r.code, 0, r.err);
    return (JSON.parse(r.out) as PlanResult).perGpu.totalBytes;
  };
  const flag = await total('--flash-attention');
  assert.equal(flag, await total('--attention', 'flash'), 'the flag is the same as --attention flash');
  // the math kernel of an 8k prefill holds one layer's scores: 32 heads x 8192^2 fp32 values (8 GiB)
  const math = await total('--attention', 'eager');
  assert.ok(math - flag >= 32 * 8192 * 8192 * 4, `eager ${math} against flash ${flag}`);
});

test("estimate() gives a serving engine's start-up, the figure plan() gives for the same options", () => {
  const m = catalogueModel('llama-3-8b');
  const o = infer({ engine: 'vllm' });
  const p = plan(m, o, machineFromCatalogue('h200'));
  const e = estimate(m, o);
  assert.equal(e.totalBytes, p.perGpu.totalBytes);
  // vLLM takes 90% of the GPU by default: the estimate is the engine's budget and what sits outside it, not the weights
  assert.ok(e.totalBytes > 0.9 * 0.9 * machineFromCatalogue('h200').capacityBytes, `${e.totalBytes}`);
});
