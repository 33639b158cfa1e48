/** The plan page's ranked changes in headless Chromium: the same as the CLI's, and applying one plans what its command plans. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { PlanResult } from '../plan/plan.js';
import { CHROMIUM, runCli, withChromiumPage } from '../testing/harness.js';

test('the page shows the CLI ranked changes; applying each gives the plan its command gives', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-plan-fit-'));
  try {
    const html = join(dir, 'plan.html');
    const json = async (args: string[]): Promise<PlanResult> => {
      const r = await runCli([...args, '--json']);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as PlanResult;
    };
    const asked = await json(['plan', '--model', 'qwen2.5-7b', '--gpu', 'h100', '--html', html]);
    assert.equal(asked.fits, false);
    assert.ok(asked.suggestions.length >= 3);
    // each suggestion's command, run as the CLI runs it (the words after `gpumem`; catalogue names need no quoting)
    const byCommand = await Promise.all(asked.suggestions.map((s) => json(s.command.split(' ').slice(1))));
    const { value, errors } = await withChromiumPage(html, async (page) => {
      const read = () => page.evaluate('window.gpumemPlanResult') as Promise<PlanResult>;
      const first = await read();
      const buttons = await page.locator('button.apply').count();
      const applied: PlanResult[] = [];
      for (let k = 0; k < first.suggestions.length; k++) {
        await page.reload();
        await page.locator('button.apply').nth(k).click();
        applied.push(await read());
      }
      return { first, buttons, applied };
    });
    assert.deepEqual(errors, []);
    assert.equal(value.buttons, asked.suggestions.length);
    assert.deepEqual(
      value.first.suggestions.map((s) => [s.flags, s.command, s.bytesPerGpu, s.cost]),
      asked.suggestions.map((s) => [s.flags, s.command, s.bytesPerGpu, s.cost]),
    );
    for (const [k, s] of asked.suggestions.entries()) {
      assert.equal(value.applied[k]!.fits, true, s.command);
      assert.equal(value.applied[k]!.perGpu.totalBytes, byCommand[k]!.perGpu.totalBytes, s.command);
      assert.equal(byCommand[k]!.perGpu.totalBytes, s.bytesPerGpu, s.command);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
