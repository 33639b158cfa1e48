/**
 * Hugging Face generate's program: the prefill as the block ops under torch.no_grad() (block.ts `inference`), the
 * sampling step with min_new_tokens' processors, everything the run made let go of when generate returns.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catalogueModel } from '../catalogue.js';
import { estimateInfer, generateSetup } from '../infer.js';
import { DEFAULT_INPUTS, planOptionsFrom, type PlanInputs } from '../inputs.js';
import type { InferOptions } from '../options.js';
import { generateProgram } from './generate.js';
import { type H, type Mem, type Phase, type Runs, type Tag, unrolled } from './mem.js';

const infer = (i: Partial<PlanInputs>): InferOptions => planOptionsFrom({ ...DEFAULT_INPUTS, mode: 'infer', ...i }) as InferOptions;

/** A Mem that counts the bytes of live tensors by line, and refuses a free of a tensor that is not live. */
class Ledger implements Mem {
  readonly live = new Map<H, { bytes: number; tag: Tag }>();
  private next = 1;
  alloc(bytes: number, tag: Tag): H {
    if (!(bytes > 0)) return 0;
    this.live.set(this.next, { bytes, tag });
    return this.next++;
  }
  free(...hs: H[]): void {
    for (const h of hs) {
      if (!h) continue;
      assert.ok(this.live.delete(h), `tensor ${h} freed twice`);
    }
  }
  retag(h: H, tag: Tag): void {
    const t = this.live.get(h);
    if (t) t.tag = tag;
  }
  phase(_p: Phase): void {}
  repeat<T>(n: number, body: (i: number) => T): Runs<T> {
    return unrolled(n, body);
  }
}

test('after generate returns only the weights and the last cache are live: every prefill and sampling tensor is freed once', () => {
  for (const name of ['llama-3-8b', 'qwen3-8b', 'gemma-2-9b', 'mixtral-8x7b', 'gpt-2', 'phi-2']) {
    const m = catalogueModel(name);
    for (const minNewTokens of [undefined, 8]) {
      const s = generateSetup(m, infer({ batch: 2, prompt: 32, newTokens: 8, minNewTokens }));
      const mem = new Ledger();
      generateProgram(mem, s, true);
      const lines = new Set([...mem.live.values()].map((t) => t.tag));
      assert.deepEqual(
        [...lines].sort((a, b) => a.id - b.id),
        [s.tags.weights, s.tags.kv],
        `${name}: ${[...lines].map((t) => t.name)}`,
      );
    }
  }
});

test("min_new_tokens: each step's two length processors clone the fp32 scores; the copy and the scores stay bound", () => {
  const m = catalogueModel('llama-3-8b');
  const scores = 16 * m.vocab * 4;
  const base = estimateInfer(m, infer({ batch: 16, prompt: 8, newTokens: 512 }));
  const min = estimateInfer(m, infer({ batch: 16, prompt: 8, newTokens: 512, minNewTokens: 512 }));
  const logits = (e: typeof base): number => e.fullLines.find((l) => l.name === 'fp32 logits')?.bytes ?? 0;
  // without processors the step's copy is its scores; with them the copy and the masked scores are two tensors
  assert.ok(logits(min) > logits(base), `${logits(min)} against ${logits(base)}`);
  const peak = (e: typeof base): number => e.lines.filter((l) => l.field !== 'overheadBytes').reduce((a, l) => a + l.bytes, 0);
  assert.ok(peak(min) > peak(base));
  assert.ok(peak(min) - peak(base) <= 4 * scores, `${peak(min) - peak(base)} more than four score tensors`);
  // once min_new_tokens are made the processors stop: a short minimum holds at the peak (the last step) what none does
  const short = estimateInfer(m, infer({ batch: 16, prompt: 8, newTokens: 512, minNewTokens: 1 }));
  const atPeak = (e: typeof base): number => e.lines.find((l) => l.name === 'fp32 logits')?.bytes ?? 0;
  assert.equal(atPeak(short), atPeak(base));
  assert.ok(atPeak(min) > atPeak(base));
});
