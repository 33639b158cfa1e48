/**
 * The precision policy from first principles: torchao's float8 training changes no dtype of the run it converts
 * (Float8Linear keeps the module's weight; fp8 exists only inside the matmul), so its model states are those of the
 * run it converts, bytes per parameter as torch makes them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { trainOptions } from '../testing/plan-options.js';
import { catalogueModel } from './catalogue.js';
import { estimate } from './estimate.js';
import { basePrecision, computeDtypes, float8Linears, pureBf16, stateBytes } from './precision.js';

test("torchao's float8 keeps the states of the run it converts: fp32 weights, gradients and AdamW moments over amp-bf16, bf16 over bf16-pure", () => {
  // AdamW: exp_avg and exp_avg_sq in the parameter's dtype (torch.optim.AdamW's zeros_like)
  assert.deepEqual(
    [stateBytes('fp8-torchao', 'adamw').weights, stateBytes('fp8-torchao', 'adamw').grads, stateBytes('fp8-torchao', 'adamw').optimizer],
    [4, 4, 8],
  );
  assert.deepEqual(
    [stateBytes('fp8-torchao-bf16', 'adamw').weights, stateBytes('fp8-torchao-bf16', 'adamw').grads, stateBytes('fp8-torchao-bf16', 'adamw').optimizer],
    [2, 2, 4],
  );
  assert.deepEqual(stateBytes('fp8-torchao', 'adamw'), stateBytes('amp-bf16', 'adamw'));
  assert.equal(basePrecision('fp8-torchao'), 'amp-bf16');
  assert.ok(float8Linears('fp8-torchao') && float8Linears('fp8-torchao-bf16') && !float8Linears('amp-bf16') && !float8Linears('fp8'));
  assert.ok(pureBf16('fp8-torchao-bf16') && !pureBf16('fp8-torchao'));
  // without FSDP the converted run computes under autocast (fp32 residual stream, bf16 matmul outputs)
  assert.deepEqual(computeDtypes('fp8-torchao', undefined), computeDtypes('amp-bf16', undefined));
});

test('on one GPU a Float8Linear casts its fp32 weight to fp8 itself: no autocast bf16 weight cache, an fp8 copy while it runs', () => {
  const m = catalogueModel('llama-3-8b');
  const amp = estimate(m, trainOptions({ precision: 'amp-bf16', batch: 1, seq: 512 }));
  const f8 = estimate(m, trainOptions({ precision: 'fp8-torchao', batch: 1, seq: 512 }));
  assert.ok(amp.autocastCacheBytes > 0, 'autocast caches a bf16 copy of each fp32 matmul weight');
  assert.ok(f8.autocastCacheBytes < amp.autocastCacheBytes, 'only the output layer (not converted) goes through autocast');
  assert.equal(f8.optimizerBytes, amp.optimizerBytes);
  assert.equal(f8.parametersBytes, amp.parametersBytes);
});
