/**
 * The planner against the held-back runs (issue 21's bar): every row of fixtures/plan/ marked "test", planned with
 * the planner's defaults and the flags that describe the run, its figure compared with the planner quantity of its
 * kind (tools/plan-accuracy.mjs). Rows marked "fit" (the adapter count and the allocator replay were built from them)
 * never count. The bar is 90% of the figures within ±10%; where a kind is not there yet, its bound is what it is now,
 * with the reason beside it, so that a change that loses a figure fails here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

interface Result {
  row: { id: string; role: string };
  figure: { measures: string };
  err?: number;
  refusal?: string;
}
interface Count {
  test: number;
  expressible: number;
  within: number;
}
interface Tool {
  loadSets(files: string[], configDir: string): Promise<Array<{ set: string; split: string; rows: Array<{ id: string; role: string }> }>>;
  evaluateRow(row: unknown): Promise<Result[]>;
  summarise(results: Result[]): Count & { byMeasure: Record<string, Count> };
}

const tool = (): Promise<Tool> => import(new URL('../../tools/plan-accuracy.mjs', import.meta.url).href) as Promise<Tool>;

/** The bar, and where a kind is short of it today, today's share and why. */
const BOUNDS: Record<string, { share: number; why: string }> = {
  allocated: {
    share: 0.9,
    why:
      "at the bar since LitGPT's rows carry --framework litgpt (its chunked loss and loop, Lightning quantising the output layer, " +
      "bitsandbytes 0.42's inputs kept past the backward pass, softcapped attention outside SDPA) and PEFT's fused MoE experts are " +
      "counted; the few left: LitGPT's FSDP1 gemma-2b full run, DoRA on every linear layer, torchtune's compiled run without a " +
      'checkpoint (-12%: its layers and loss compiled apart, not measured here), and two torchtune runs whose figure is below what ' +
      'their stated optimizer holds (foreach AdamW) or that keep paged 8-bit states',
  },
  reserved: {
    share: 0.9,
    why:
      'at the bar since the h200-stacks set was re-recorded with each run in a process of its own (2026-12-03: the shared ' +
      "process had carried FSDP1's live 9.27 GiB into every later row's max_memory_reserved); the few left: Pythia under a " +
      "checkpoint and in full fine-tuning (the replay of its segments), Trainy's 32-GPU compiled run (+10%: the allocator " +
      "replayed in the eager block's order) and torchtune's QLoRA, whose reserved peak is set at model init by torchao's NF4 " +
      'quantisation (9.13 GB before training), which is not replayed',
  },
  device: {
    share: 0.9,
    why: 'at the bar; the two left are Pythia runs (as reserved)',
  },
};

test("held-back runs: each kind of figure lands within ±10% at the issue's bar, or at today's share for the reason given", async () => {
  const { loadSets, evaluateRow, summarise } = await tool();
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-accuracy-'));
  try {
    // the bar holds on the sets the planner was built from and the recorded runs; the fit and held-out sources (one
    // file a source) are reported apart by the tool: a fit source is evidence of nothing, a held-out one is judged
    // against the bar by whoever holds it back
    const sets = (await loadSets([], dir)).filter((s) => s.split === 'built-from' || s.split === 'recorded');
    const results: Result[] = [];
    for (const s of sets) for (const row of s.rows) results.push(...(await evaluateRow(row)));
    const fit = results.filter((r) => r.row.role === 'fit');
    assert.ok(fit.length >= 40, 'the fit runs are in the sets');
    const s = summarise(results);
    assert.equal(s.test, results.length - fit.length, 'a fit row never counts');
    for (const [kind, bound] of Object.entries(BOUNDS)) {
      const k = s.byMeasure[kind]!;
      const share = k.within / k.expressible;
      assert.ok(
        share >= Math.min(0.9, bound.share) - 1e-9,
        `${kind}: ${k.within} of ${k.expressible} within ±10% (${(share * 100).toFixed(0)}%); ${bound.why}`,
      );
    }
    // every run is expressible (torch.compile without a checkpoint too: program/compiled.ts counts what its
    // partitioner keeps)
    const refused = results.filter((r) => r.row.role === 'test' && r.refusal !== undefined);
    assert.deepEqual(
      refused.map((r) => r.row.id),
      [],
      refused.map((r) => `${r.row.id}: ${r.refusal}`).join('\n'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
