/**
 * `gpumem analyze SNAPSHOT --html` in a real headless Chromium: the memory_viz-style timeline with stacks on hover,
 * the segments, and replay's what-ifs, on a pickle written from the documented structure and on snapshots recorded
 * on GPUs (../shared/traces/cs336-a2-systems, read in place, and the project's own H200 recordings).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sharedTest, sharedTrace } from '../testing/shared-traces.js';
import { analyzeFiles } from '../analyze/analyze.js';
import { readPytorchSnapshot } from '../formats/pytorch-snapshot.js';
import { snapshotView, type SnapshotView } from '../replay/memory-timeline.js';
import { CHROMIUM, runCli, withChromiumPage } from '../testing/harness.js';
import { MiB, writeSnapshotFixture } from '../testing/snapshot-fixture.js';
import { renderSnapshotHtml } from './snapshot-html.js';

const skip = CHROMIUM ? false : 'chromium is not installed';

/** Bytes as the page writes them. */
function pageBytes(n: number): string {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n.toFixed(0) : n.toFixed(1)} ${u[i]}`;
}

/** Pixels of a canvas that are not white: proof that something was drawn. */
const inked = (id: string): string => `(() => {
  const c = document.getElementById(${JSON.stringify(id)});
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n++;
  return n;
})()`;

/** Moves the mouse onto GPU `device`'s timeline at a step and a byte height, and returns the tooltip's text. */
async function hoverTimeline(page: import('playwright-core').Page, device: number, step: number, bytes: number): Promise<string> {
  const at = await page.evaluate(`(() => { const s = window.gpumemSnapshot.scales(${device}); return [s.x(${step}), s.y(${bytes})]; })()`);
  const [x, y] = at as [number, number];
  await page.locator(`#timeline-${device}`).scrollIntoViewIfNeeded();
  const box = (await page.locator(`#timeline-${device}`).boundingBox())!;
  await page.mouse.move(Math.round(box.x + x), Math.round(box.y + y));
  return (await page.locator('#tip').textContent()) ?? '';
}

test('the page of a three-GPU snapshot pickle: timeline bands as memory_viz stacks them, stacks on hover, segments, what-ifs', { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-snaphtml-'));
  try {
    const { pickle } = writeSnapshotFixture(dir);
    const html = join(dir, 'page.html');
    const r = await runCli(['analyze', pickle, '--html', html]);
    assert.equal(r.code, 0, r.err);
    assert.ok(!/<script[^>]+src=|<link[^>]+href=/i.test(readFileSync(html, 'utf8')), 'nothing is fetched: the page works offline');
    const { value, errors } = await withChromiumPage(html, async (page) => {
      const data = (await page.evaluate('window.gpumemSnapshot.data')) as SnapshotView;
      const ink = await Promise.all([0, 1, 2].flatMap((d) => [page.evaluate(inked(`timeline-${d}`)), page.evaluate(inked(`segments-${d}`))]));
      // GPU 0's 8 MiB allocated first, hovered at event 2 halfway up its band
      const first = await hoverTimeline(page, 0, 2, 4 * MiB);
      // the 4 MiB band: on top of 16 MiB until the 8 MiB below it is freed at event 4, then at 8 MiB
      const third = await hoverTimeline(page, 0, 4.5, 10 * MiB);
      await page.locator('#segments-1').scrollIntoViewIfNeeded();
      const box = (await page.locator('#segments-1').boundingBox())!;
      await page.mouse.move(box.x + 10, box.y + 5);
      const segment = (await page.locator('#tip').textContent()) ?? '';
      const whatIf = (await page.locator('table.whatif').first().textContent()) ?? '';
      return { data, ink, first, third, segment, whatIf };
    });
    assert.deepEqual(errors, []);
    for (const [i, n] of value.ink.entries()) assert.ok((n as number) > 100, `canvas ${i} is drawn`);
    const gpu0 = value.data.devices[0]!.timeline;
    // events: alloc, alloc, alloc, free_completed (free_requested waits for it), alloc
    assert.equal(gpu0.steps, 5);
    assert.deepEqual(
      gpu0.bands.map((b) => [b.size / MiB, b.start, b.end, b.points.map((p, j) => (j % 2 ? p / MiB : p))]),
      [
        [8, 1, 5, [1, 0]],
        [8, 2, 4, [2, 8]],
        [4, 3, 5, [3, 16, 4, 8]],
        [2, 5, 5, [5, 12]],
      ],
    );
    assert.equal(gpu0.peakBytes, 20 * MiB);
    assert.match(value.first, /^8\.0 MiB allocated at event 1, still live at the end\nforward \(model\.py:41\)\ntrain_step \(train\.py:12\)$/);
    assert.doesNotMatch(value.first, /unwind/, "the recorder's own frames are left out");
    assert.match(value.third, /^4\.0 MiB allocated at event 3/);
    assert.match(value.segment, /block of 100\.0 MiB, allocated/);
    for (const name of ['pytorch-like', 'gpumem', 'gpumem-growable', 'gpumem-max-split-200MiB']) assert.ok(value.whatIf.includes(name), name);
    assert.match(value.whatIf, /20\.00 MiB/, 'peak reserved of the replays of GPU 0');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const SHARED = sharedTrace('cs336-a2-systems/memory_files/');
const FIXTURES = new URL('../../fixtures/snapshots/', import.meta.url).pathname;
const recordings = [
  ...['memory_ctx128_forward', 'memory_ctx256_forward_mixed', 'memory_ctx128_fullstep'].map((n) => `${SHARED}${n}.pickle.json.gz`),
  `${FIXTURES}gpt2-train.snapshot.json.gz`,
];

for (const file of recordings) {
  // the project's own recording is always there; the others are read in place from ../shared/traces
  const register = file.startsWith(SHARED) ? sharedTest : (name: string, o: { skip?: string | false }, fn: () => Promise<void>) => test(name, o, fn);
  register(
    `the page of a snapshot recorded on a GPU (${file.split('/').slice(-1)[0]}): drawn, consistent with the snapshot's end state, hover works`,
    {
      skip: skip || (existsSync(file) || !file.startsWith(SHARED) ? false : `${file} is absent`),
    },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'gpumem-snaphtml-'));
      try {
        const snap = await readPytorchSnapshot(file, { stacks: true });
        const view = snapshotView(snap);
        const html = join(dir, 'page.html');
        writeFileSync(html, renderSnapshotHtml(await analyzeFiles([file]), view));
        const d = view.devices[0]!;
        const t = d.timeline;
        // what the timeline has live after the last event is what the snapshot says was in use when it was taken
        const endLive = (series: number[]): number => series[series.length - 1]!;
        const inUse = snap.devices[0]!.segments.flatMap((s) => s.blocks).reduce((n, b) => n + (b.state === 'inactive' ? 0 : b.requested), 0);
        assert.equal(endLive(t.drawn) + endLive(t.rest), inUse);
        assert.ok(t.peakBytes >= inUse && t.peakBytes >= t.liveAtStartBytes);
        assert.ok(t.bands.length > 0 && t.bands.length <= 3000);
        const r = d.replay!;
        for (const c of r.configurations) assert.ok(c.minDeviceBytes >= r.trace.peakRequestedBytes, c.name);
        // the band largest on screen in both directions, hovered at the whole pixel nearest its middle: the tooltip
        // must name an allocation that covers the point under the pointer
        const extent = (b: (typeof t.bands)[number]): number => Math.min(b.size / t.peakBytes, (b.end - b.start) / t.steps);
        const big = t.bands.reduce((a, b) => (extent(b) > extent(a) ? b : a));
        const mid = (big.start + big.end) / 2;
        const edge = (b: (typeof t.bands)[number], step: number): number => {
          let lo = b.points[1]!;
          for (let j = 0; j < b.points.length && b.points[j]! <= step; j += 2) lo = b.points[j + 1]!;
          return lo;
        };
        const { value, errors } = await withChromiumPage(html, async (page) => {
          await page.locator(`#timeline-${d.device}`).scrollIntoViewIfNeeded();
          const box = (await page.locator(`#timeline-${d.device}`).boundingBox())!;
          const [x, y] = (await page.evaluate(
            `(() => { const s = window.gpumemSnapshot.scales(${d.device}); return [Math.round(s.x(${mid})), Math.round(s.y(${edge(big, mid) + big.size / 2}))]; })()`,
          )) as [number, number];
          // whole viewport pixels, as a pointer gives them; the canvas's own offset can be fractional
          const vx = Math.round(box.x + x);
          const vy = Math.round(box.y + y);
          await page.mouse.move(vx, vy);
          const [step, bytes] = (await page.evaluate(
            `(() => { const s = window.gpumemSnapshot.scales(${d.device}); return [s.step(${vx - box.x}), s.bytes(${vy - box.y})]; })()`,
          )) as [number, number];
          return {
            ink: await page.evaluate(inked(`timeline-${d.device}`)),
            tip: (await page.locator('#tip').textContent()) ?? '',
            step,
            bytes,
            rows: await page.locator('table.whatif tbody tr').count(),
          };
        });
        assert.deepEqual(errors, []);
        assert.ok((value.ink as number) > 1000);
        const named = /^(\S+ \S+) allocated at event (\d+)/.exec(value.tip);
        assert.ok(named, value.tip);
        const under = t.bands.filter(
          (b) =>
            pageBytes(b.size) === named[1] &&
            b.start === Number(named[2]) &&
            value.step >= b.start &&
            value.step < b.end &&
            value.bytes >= edge(b, value.step) &&
            value.bytes < edge(b, value.step) + b.size,
        );
        assert.equal(under.length > 0, true, `${value.tip} at event ${value.step}, ${value.bytes} bytes`);
        assert.equal(value.rows, r.configurations.length);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
}
