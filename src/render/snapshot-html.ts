/**
 * `gpumem analyze SNAPSHOT --html`: the page a PyTorch user expects of a memory snapshot. Per GPU: the active-memory
 * timeline as memory_viz draws it (allocations stacked over time, each one's stack frames on hover), the segments
 * and their blocks beside it, and pool replay's what-ifs (peak reserved and the smallest device under each pool
 * configuration); then the findings. Drawn on canvases by a small script in the page: it works offline.
 */
import type { AnalyzeResult } from '../analyze/result.js';
import type { SnapshotView } from '../replay/memory-timeline.js';
import { formatBytes } from '../units.js';
import { esc, htmlTable, renderPage } from './html.js';

/** JSON that is safe inside a <script> element. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The drawing and hovering, run in the page. Kept as plain JavaScript: the page needs no library. */
const SCRIPT = String.raw`
const D = GPUMEM_SNAPSHOT;
const COLOURS = ['#4e79a7','#f28e2b','#e15759','#76b7b2','#59a14f','#edc948','#b07aa1','#ff9da7','#9c755f','#bab0ac','#86bcb6','#d37295'];
const STATE = ['allocated', 'freed, waiting on a stream', 'free'];
const STATE_COLOUR = ['#4e79a7', '#f28e2b', '#d0d7de'];
function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + u[i];
}
/** The value of a step series [t, v, t, v...] at step t. */
function at(series, t) {
  let v = series[1];
  for (let j = 0; j < series.length && series[j] <= t; j += 2) v = series[j + 1];
  return v;
}
function frames(id) {
  const s = id >= 0 ? D.stacks[id] : undefined;
  return s && s.length ? s.join('\n') : '(no stack recorded)';
}
function showTip(tip, ev, text) {
  tip.textContent = text; tip.style.display = 'block';
  tip.style.left = (ev.pageX + 14) + 'px'; tip.style.top = (ev.pageY + 14) + 'px';
}
function setup(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * ratio; canvas.height = h * ratio;
  const ctx = canvas.getContext('2d'); ctx.scale(ratio, ratio);
  return { ctx, w, h };
}
const M = { l: 70, r: 10, t: 10, b: 28 };
/** Pixel scales of a device's timeline canvas. */
function scales(dev, w, h) {
  const tl = dev.timeline, top = Math.max(1, tl.peakBytes);
  return {
    x: (s) => M.l + (s / Math.max(1, tl.steps)) * (w - M.l - M.r),
    y: (b) => h - M.b - (b / top) * (h - M.t - M.b),
    step: (px) => ((px - M.l) / (w - M.l - M.r)) * Math.max(1, tl.steps),
    bytes: (py) => ((h - M.b - py) / (h - M.t - M.b)) * top,
  };
}
/** The band under a step and a byte offset, or -1. */
function bandAt(dev, step, b) {
  const bands = dev.timeline.bands;
  for (let i = 0; i < bands.length; i++) {
    const k = bands[i];
    if (step < k.start || step >= k.end) continue;
    const lo = at(k.points, step);
    if (b >= lo && b < lo + k.size) return i;
  }
  return -1;
}
function drawTimeline(dev, canvas, tip) {
  const { ctx, w, h } = setup(canvas);
  const tl = dev.timeline, s = scales(dev, w, h);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  tl.bands.forEach((k, i) => {
    const p = k.points, n = p.length / 2;
    ctx.beginPath();
    ctx.moveTo(s.x(p[0]), s.y(p[1]));
    for (let j = 1; j < n; j++) { ctx.lineTo(s.x(p[2 * j]), s.y(p[2 * j - 1])); ctx.lineTo(s.x(p[2 * j]), s.y(p[2 * j + 1])); }
    ctx.lineTo(s.x(k.end), s.y(p[2 * n - 1])); ctx.lineTo(s.x(k.end), s.y(p[2 * n - 1] + k.size));
    for (let j = n - 1; j >= 1; j--) { ctx.lineTo(s.x(p[2 * j]), s.y(p[2 * j + 1] + k.size)); ctx.lineTo(s.x(p[2 * j]), s.y(p[2 * j - 1] + k.size)); }
    ctx.lineTo(s.x(p[0]), s.y(p[1] + k.size));
    ctx.closePath(); ctx.fillStyle = COLOURS[i % COLOURS.length]; ctx.fill();
  });
  // the summed small allocations, on top of the drawn ones
  const ts = [...new Set([...tl.drawn.filter((_, j) => j % 2 === 0), ...tl.rest.filter((_, j) => j % 2 === 0), tl.steps])].sort((a, b) => a - b);
  ctx.beginPath();
  ts.forEach((t, j) => { const y = s.y(at(tl.drawn, t)); if (j === 0) ctx.moveTo(s.x(t), y); else ctx.lineTo(s.x(t), y); if (j + 1 < ts.length) ctx.lineTo(s.x(ts[j + 1]), y); });
  for (let j = ts.length - 1; j >= 0; j--) { const t = ts[j], y = s.y(at(tl.drawn, t) + at(tl.rest, t)); if (j + 1 < ts.length) ctx.lineTo(s.x(ts[j + 1]), y); ctx.lineTo(s.x(t), y); }
  ctx.closePath(); ctx.fillStyle = 'rgba(110,119,129,0.55)'; ctx.fill();
  // axes
  ctx.strokeStyle = '#57606a'; ctx.fillStyle = '#57606a'; ctx.font = '11px sans-serif';
  ctx.beginPath(); ctx.moveTo(M.l, M.t); ctx.lineTo(M.l, h - M.b); ctx.lineTo(w - M.r, h - M.b); ctx.stroke();
  for (let q = 0; q <= 4; q++) {
    const b = (tl.peakBytes * q) / 4; ctx.fillText(bytes(b), 4, s.y(b) + 4);
    const t = Math.round((tl.steps * q) / 4); ctx.fillText(String(t), Math.min(w - 40, s.x(t)), h - 10);
  }
  canvas.onmousemove = (ev) => {
    const r = canvas.getBoundingClientRect();
    const step = s.step(ev.clientX - r.left), b = s.bytes(ev.clientY - r.top);
    const i = bandAt(dev, step, b);
    if (i < 0) {
      const lo = at(tl.drawn, step), hi = lo + at(tl.rest, step);
      if (step >= 0 && step <= tl.steps && b >= lo && b < hi) return showTip(tip, ev, bytes(hi - lo) + ' in allocations too small to draw one by one (' + tl.restCount + ' in all)');
      tip.style.display = 'none'; return;
    }
    const k = tl.bands[i];
    showTip(tip, ev, bytes(k.size) + ' allocated at event ' + k.start + (k.start === 0 ? ' (before recording began)' : '') + (k.end < tl.steps ? ', freed at event ' + k.end : ', still live at the end') + '\n' + frames(k.stack));
  };
  canvas.onmouseleave = () => { tip.style.display = 'none'; };
}
function drawSegments(dev, canvas, tip) {
  const { ctx, w, h } = setup(canvas);
  const segs = dev.segments, largest = Math.max(1, ...segs.map((x) => x.size));
  const row = Math.max(2, Math.min(18, Math.floor((h - 4) / Math.max(1, segs.length))));
  const width = w - 8;
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  segs.forEach((g, r) => {
    let x = 4;
    for (let j = 0; j < g.blocks.length; j += 3) {
      const bw = (g.blocks[j] / largest) * width;
      ctx.fillStyle = STATE_COLOUR[g.blocks[j + 1]]; ctx.fillRect(x, 2 + r * row, Math.max(0.5, bw), row - 1);
      x += bw;
    }
  });
  canvas.onmousemove = (ev) => {
    const rect = canvas.getBoundingClientRect();
    const r = Math.floor((ev.clientY - rect.top - 2) / row), g = segs[r];
    if (!g) { tip.style.display = 'none'; return; }
    let x = 4; const px = ev.clientX - rect.left;
    for (let j = 0; j < g.blocks.length; j += 3) {
      const bw = (g.blocks[j] / largest) * width;
      if (px >= x && px < x + bw) return showTip(tip, ev, 'segment at 0x' + g.address.toString(16) + ' (' + bytes(g.size) + (g.expandable ? ', expandable' : '') + '): block of ' + bytes(g.blocks[j]) + ', ' + STATE[g.blocks[j + 1]] + '\n' + (g.blocks[j + 1] === 2 ? '' : frames(g.blocks[j + 2])));
      x += bw;
    }
    tip.style.display = 'none';
  };
  canvas.onmouseleave = () => { tip.style.display = 'none'; };
}
const tip = document.getElementById('tip');
function drawAll() {
  D.devices.forEach((dev) => {
    drawTimeline(dev, document.getElementById('timeline-' + dev.device), tip);
    drawSegments(dev, document.getElementById('segments-' + dev.device), tip);
  });
}
drawAll();
// drawn to the canvases' size: draw again when the window changes it
let resizing;
window.addEventListener('resize', () => { clearTimeout(resizing); resizing = setTimeout(drawAll, 100); });
window.gpumemSnapshot = { data: D, scales: (device) => { const c = document.getElementById('timeline-' + device); const dev = D.devices.find((d) => d.device === device); return scales(dev, c.clientWidth, c.clientHeight); } };
`;

function whatIfs(v: SnapshotView['devices'][number]): string {
  const r = v.replay;
  if (!r) return '<p class="note">No allocation events on this GPU: nothing to replay.</p>';
  const t = r.trace;
  const recorded =
    t.peakReservedBytes !== undefined
      ? `The recording allocator reserved at most <b>${esc(formatBytes(t.peakReservedBytes))}</b> for a peak of ${esc(formatBytes(t.peakRequestedBytes))} requested.`
      : `Peak requested: ${esc(formatBytes(t.peakRequestedBytes))} (the trace has no segment events: what the recording allocator reserved is not known).`;
  const mid = t.startedMidRun
    ? ` Recording began mid-run: ${t.startedMidRun.blocks} blocks (${esc(formatBytes(t.startedMidRun.bytes))}) were live before the first event; the replay starts from them.`
    : '';
  return `<p>${recorded}${mid}</p>${htmlTable(
    ['configuration', 'peak reserved', 'smallest device', 'reserved / allocated', 'what it is'],
    r.configurations.map((c) => [
      c.name,
      formatBytes(c.peakReservedBytes, 2),
      formatBytes(c.minDeviceBytes, 2),
      c.reservedOverAllocated.toFixed(3),
      c.description,
    ]),
    { className: 'data whatif' },
  )}<p class="note">Replayed on a simulated device of this GPU's events alone: bytes counted, not measured. The smallest device is the least memory (to 2 MiB) on which the replay ran without running out.</p>`;
}

/** The HTML page of a snapshot's analysis and its per-GPU view. */
export function renderSnapshotHtml(r: AnalyzeResult, view: SnapshotView): string {
  const s = r.summary;
  const settings = view.allocatorSettings;
  const conf = typeof settings?.PYTORCH_CUDA_ALLOC_CONF === 'string' && settings.PYTORCH_CUDA_ALLOC_CONF !== '' ? settings.PYTORCH_CUDA_ALLOC_CONF : 'default';
  const sections = view.devices.map((d) => {
    const tl = d.timeline;
    const left = d.segmentsLeftOut.count > 0 ? ` ${d.segmentsLeftOut.count} more segments (${esc(formatBytes(d.segmentsLeftOut.bytes))}) are not drawn.` : '';
    return {
      heading: `GPU ${d.device}`,
      html: `<h3>Active memory timeline</h3>
<p class="note">Each band is one allocation, stacked on those allocated before it and moving down when one below it is freed; x is the allocation or free event (${tl.steps} in all), y the bytes live (peak ${esc(formatBytes(tl.peakBytes))}). ${tl.bands.length} allocations are drawn one by one; ${tl.restCount} smaller ones are summed in the grey band on top. Hover for an allocation's size and stack.${tl.liveAtStartBytes > 0 ? ` ${esc(formatBytes(tl.liveAtStartBytes))} was live before the first event (drawn from event 0).` : ''}</p>
<figure class="chart" style="height:360px"><canvas id="timeline-${d.device}" style="width:100%;height:100%" role="img" aria-label="active memory timeline of GPU ${d.device}"></canvas></figure>
<h3>Segments when the snapshot was taken</h3>
<p class="note">One row per segment (an expandable segment's mapped range), its blocks in address order: <span style="color:#4e79a7">allocated</span>, <span style="color:#f28e2b">freed but waiting on a stream</span>, <span style="color:#8c959f">free</span>; widths to scale with the largest segment.${left}</p>
<figure class="chart" style="height:${Math.min(600, Math.max(60, 4 + 10 * d.segments.length))}px"><canvas id="segments-${d.device}" style="width:100%;height:100%" role="img" aria-label="segments of GPU ${d.device}"></canvas></figure>
<h3>What if: pool replay</h3>${whatIfs(d)}`,
    };
  });
  const findings = r.findings.length
    ? r.findings
        .map(
          (f) =>
            `<div class="card"><h3>${esc(`${f.rule}: ${f.title}`)} <span class="${f.severity === 'high' ? 'bad' : f.severity === 'medium' ? 'warn' : 'note'}">[${esc(f.severity)}]</span></h3><ul>${f.evidence.map((e) => `<li>${esc(e)}</li>`).join('')}</ul><p class="note">${esc(f.savingHow)}</p><p><b>change:</b> ${esc(f.change)}</p></div>`,
        )
        .join('\n')
    : '<p class="good">No rule found a memory problem in this snapshot.</p>';
  const notes = s.notes.map((n) => `<p class="note">note: ${esc(n)}</p>`).join('');
  const tip =
    '<div id="tip" style="display:none;position:absolute;z-index:10;max-width:640px;white-space:pre-wrap;font:12px/1.35 ui-monospace,monospace;background:#fff;border:1px solid #8c959f;border-radius:4px;padding:6px 8px;box-shadow:0 2px 8px rgba(0,0,0,.15)"></div>';
  return renderPage({
    title: 'gpumem analyze: memory snapshot',
    subtitle: `${view.file}; allocator settings: ${conf}${settings?.expandable_segments === true ? ' (expandable segments on)' : ''}`,
    sections: [
      ...sections,
      { heading: `Findings (${r.findings.length})`, html: `${findings}${notes}` },
      {
        heading: 'About this page',
        html: `<p class="note">Drawn by gpumem from the snapshot alone, offline; the timeline's layout follows PyTorch's memory_viz.</p>${tip}<script>const GPUMEM_SNAPSHOT = ${scriptJson(view)};\n${SCRIPT}</script>`,
      },
    ],
    charts: [],
  });
}
