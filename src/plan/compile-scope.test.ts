/**
 * `--compile blocks` (torch.compile on the transformer blocks only, the loss eager, as torchtitan's apply_compile ran
 * at 9dec370) beside `--compile` (the blocks and the loss): the blocks count as compiled, the final norm, the output
 * layer and the loss as eager.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../errors.js';
import { readConfigFile } from './config-file.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from './inputs.js';
import type { Line, TrainOptions } from './options.js';
import { plan, machineFromCatalogue } from './plan.js';
import { estimateTrain } from './train.js';

const CONFIGS = fileURLToPath(new URL('../../fixtures/plan/configs/', import.meta.url));
const m = readConfigFile(`${CONFIGS}llama-3.2-1b/config.json`);
const train = (i: Partial<PlanInputs>): TrainOptions =>
  planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'train', precision: 'amp-bf16', batch: 4, seq: 1024, ...i }) as TrainOptions;
/** The step's lines at their full size (the most each holds at any moment), whichever moment is the peak. */
const backward = (o: TrainOptions): Line[] => estimateTrain(m, o).fullLines;
const lossLines = (o: TrainOptions): Line[] => backward(o).filter((l) => l.name.startsWith('loss'));
const line = (o: TrainOptions, start: string): Line | undefined => backward(o).find((l) => l.name.startsWith(start));
const strip = (ls: Line[]) => ls.map((l) => ({ name: l.name, bytes: l.bytes }));

for (const recompute of ['none', 'op', 'full'] as const) {
  test(`--compile blocks (--recompute ${recompute}): the loss lines are eager's, the blocks' lines --compile's`, () => {
    const eager = train({ recompute });
    const all = train({ recompute, compile: 'all' });
    const blocks = train({ recompute, compile: 'blocks' });
    assert.ok(lossLines(eager).length > 0, 'the backward moment holds the loss');
    // the loss stays eager: fp32 log-probabilities kept, two fp32 logit-sized tensors in its backward
    assert.deepEqual(strip(lossLines(blocks)), strip(lossLines(eager)));
    assert.match(
      lossLines(blocks)
        .map((l) => l.name)
        .join('; '),
      /fp32 log-probabilities/,
    );
    assert.notDeepEqual(strip(lossLines(blocks)), strip(lossLines(all)), "--compile's loss is the compiled cross-entropy");
    // the blocks are compiled as under --compile
    const blockLine = recompute === 'none' ? 'activations per layer' : 'activations: layer inputs';
    const recomputed = recompute === 'none' ? undefined : 'activations of the layer being recomputed';
    assert.ok(line(blocks, blockLine), `the blocks' line (${blockLine}) is held at the backward pass`);
    assert.deepEqual(line(blocks, blockLine), line(all, blockLine));
    if (recomputed) assert.deepEqual(line(blocks, recomputed), line(all, recomputed), 'the recomputed block as its compiled backward graph makes it');
    // the final norm and the output layer sit outside the blocks: eager's count, not the whole-model graph's
    assert.ok(line(blocks, 'activations: final norm'), 'the final norm and output layer input are kept');
    assert.deepEqual(line(blocks, 'activations: final norm'), line(eager, 'activations: final norm'));
    if (recompute === 'none') assert.notDeepEqual(line(all, 'activations: final norm'), line(eager, 'activations: final norm'));
  });
}

test('--compile blocks plans between eager and --compile: the blocks keep what compiled blocks keep, the loss what eager keeps', () => {
  // per-op checkpointing, a long sequence: both the blocks' kept set and the loss's logits matter at the peak
  for (const i of [{ recompute: 'op', seq: 4096 }, { recompute: 'none' }] as const) {
    const total = (compile: PlanInputs['compile']) => estimateTrain(m, train({ ...i, compile })).totalBytes;
    assert.ok(total('all') <= total('blocks'), `${i.recompute}: the compiled loss keeps 16-bit logits, the eager one fp32`);
    assert.ok(total('blocks') <= total(false), `${i.recompute}: compiled blocks keep no more than eager blocks`);
  }
});

test('a bare --compile is all of it; the options name what was compiled', () => {
  assert.equal(train({ compile: true }).compile, 'all');
  assert.equal(train({ compile: 'all' }).compile, 'all');
  assert.equal(train({ compile: 'blocks' }).compile, 'blocks');
  assert.equal(train({}).compile, false);
  assert.deepEqual(estimateTrain(m, train({ compile: true })).lines, estimateTrain(m, train({ compile: 'all' })).lines);
  const notes = plan(m, train({ compile: 'blocks', recompute: 'op' }), machineFromCatalogue('h200')).notes.join('\n');
  assert.match(notes, /transformer blocks only/);
  assert.match(notes, /cross-entropy run eager/);
});

test('--compile blocks is refused where --compile is, naming it; a scope the planner does not know is refused', () => {
  for (const [i, why] of [
    [{ compile: 'blocks', framework: 'megatron' }, /^--compile blocks is for --framework pytorch/],
    [{ compile: 'blocks', framework: 'litgpt', lora: 8 }, /^--compile blocks is not something LitGPT's fine-tuning scripts do/],
    [{ compile: 'all', framework: 'megatron' }, /^--compile is for --framework pytorch/],
    // the page and a JSON input send the scope as text
    [{ compile: 'loss' as PlanInputs['compile'] }, /--compile takes all or blocks .*got "loss"/],
  ] as const)
    assert.throws(
      () => train(i),
      (e: unknown) => e instanceof InvalidArgumentError && why.test(e.message),
    );
  assert.throws(
    () => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer', compile: 'blocks', given: ['compile'] }),
    /--compile is for training: it contradicts --mode infer/,
  );
});
