/**
 * The interactive plan page (`gpumem plan --html FILE`, `gpumem plan --serve`): the planner runs in the browser
 * (the bundle of src/plan/browser.ts), so the controls work offline. Moving a control re-plans from the same inputs
 * the CLI takes; the page shows the peak's lines, a stacked bar against capacity, whether it fits (or, serving, the
 * KV cache the engine sizes), the changes that would make it fit and the largest batch and context that fit.
 */
import { readFileSync } from 'node:fs';
import type { PlanInputs } from '../plan/schema.js';
import type { Machine } from '../plan/plan.js';
import { chartLibrary } from './html.js';

let bundle: string | undefined;
/** The browser bundle of the planner, built by `npm run build` (tools/bundle-plan.mjs). */
function planBundle(): string {
  bundle ??= readFileSync(new URL('../plan/browser.bundle.js', import.meta.url), 'utf8');
  return bundle;
}

/** JSON that is safe inside a <script> element. */
const scriptJson = (v: unknown): string => JSON.stringify(v).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');

export interface PlanPageState {
  inputs: PlanInputs;
  /** A catalogue model name, or the text of a config.json and the name to give it. */
  model: { catalogue: string } | { configText: string; name: string };
  /** A catalogue GPU name, or a machine measured by gpumem bench. */
  gpu: { catalogue: string } | { machine: Machine };
}

const CSS = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto; max-width: 1200px; padding: 0 1rem; color: #1b1f24; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; } h2 { font-size: 1.1rem; margin: 1.2rem 0 .4rem; }
form { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: .4rem .8rem; padding: .8rem; border: 1px solid #d0d7de; border-radius: 6px; background: #f6f8fa; }
label { display: flex; flex-direction: column; font-size: .85rem; color: #57606a; } input, select, textarea { font: inherit; padding: .15rem .3rem; }
textarea { grid-column: 1 / -1; min-height: 4rem; font-family: ui-monospace, monospace; font-size: .8rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: .4rem 0; } th, td { border: 1px solid #d0d7de; padding: .2rem .5rem; text-align: left; }
th { background: #f6f8fa; } td.n { text-align: right; } td.how { color: #57606a; font-size: .85rem; }
.fits { font-size: 1.2rem; font-weight: 600; } .yes { color: #1a7f37; } .no { color: #cf222e; } .error { color: #cf222e; white-space: pre-wrap; }
.note { color: #57606a; font-size: .9rem; } label.check { justify-content: flex-end; } figure { height: 180px; margin: .6rem 0; position: relative; }
`;

/** The controls the schema does not hold: the model, the GPU, a pasted config.json. */
const CONTROLS = `
<label>model<select id="model"></select></label>
<label>GPU<select id="gpu"></select></label>
<label id="gpuMemoryLabel">GPU memory (e.g. 24GiB)<input id="gpuMemory" placeholder="24GiB"></label>
<span id="schemaControls" style="display:contents"></span>
<textarea id="config" placeholder="paste a Hugging Face config.json here and choose 'pasted config.json' as the model"></textarea>`;

/**
 * The page's script: makes a control for every option of the planner's schema (plan/schema.ts, bundled with the
 * planner), reads them back into PlanInputs as the CLI reads its flags, plans with the bundled planner, renders.
 */
const APP = `
const P = gpumemPlan;
const S = GPUMEM_STATE;
const $ = (id) => document.getElementById(id);
const gib = (b) => (b / 2 ** 30).toFixed(2);
const gb = (b) => (b / 1e9).toFixed(2);
const escText = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const SPECS = Object.entries(P.SCHEMA).filter(([, s]) => s.page);
function control(key, s) {
  const label = document.createElement('label');
  label.className = s.applies && s.applies.mode ? s.applies.mode : '';
  label.dataset.key = key;
  let el;
  if (s.kind === 'choice' || s.kind === 'scope' || (s.kind === 'int' && s.limit <= 16)) {
    el = document.createElement('select');
    const values = s.kind === 'int' ? Array.from({ length: s.limit - (s.min ?? 1) + 1 }, (_, i) => String(i + (s.min ?? 1))) : s.choices;
    if (s.kind === 'scope') el.add(new Option('no', ''));
    else if (s.default === undefined) el.add(new Option('default', ''));
    for (const v of values) el.add(new Option(v, v));
  } else {
    el = document.createElement('input');
    if (s.kind === 'flag') el.type = 'checkbox';
    else if (s.kind === 'int' || s.kind === 'fraction' || s.kind === 'percent') { el.type = 'number'; el.step = 'any'; }
  }
  el.id = key;
  label.append(s.page.label, el);
  if (s.kind === 'flag') label.classList.add('check');
  el.title = s.help;
  return label;
}
for (const [k, s] of SPECS) $('schemaControls').append(control(k, s));
for (const name of Object.keys(P.MODEL_CONFIGS)) $('model').add(new Option(name, name));
$('model').add(new Option('pasted config.json', '__pasted'));
for (const [name, g] of Object.entries(P.GPUS)) $('gpu').add(new Option(g.name, name));
$('gpu').add(new Option('another GPU: its memory', '__memory'));
if (S.gpu.machine) $('gpu').add(new Option(S.gpu.machine.name, '__bench'));
const i0 = S.inputs;
$('model').value = S.model.catalogue ?? '__pasted';
if (S.model.configText) $('config').value = S.model.configText;
$('gpu').value = S.gpu.machine ? '__bench' : S.gpu.catalogue;
const shownValue = (k, s, v) => v === undefined || v === false ? '' : s.kind === 'percent' ? String(v * 100) : s.kind === 'bytes' ? String(v / 2 ** 30) : v === true ? (s.kind === 'scope' ? s.bare : true) : String(v);
for (const [k, s] of SPECS) {
  const el = $(k);
  const v = k === 'attention' && i0.flashAttention ? 'flash' : k === 'optimizer' && i0[k] === 'adam8bit' ? 'adamw8bit' : i0[k];
  if (s.kind === 'flag') el.checked = !!v;
  else el.value = k === 'context' && v === undefined ? String(i0.prompt + i0.newTokens) : shownValue(k, s, v);
}
let chart;
const shown = (el) => el.closest('label').style.display !== 'none';
/** An input from its control, as the CLI parses its flag; undefined where the control is left empty. */
function read(k, s) {
  const el = $(k);
  if (s.kind === 'flag') return el.checked;
  const t = el.value.trim();
  if (t === '') return s.kind === 'scope' ? false : undefined;
  if (s.kind === 'int' || s.kind === 'fraction') return Number(t);
  if (s.kind === 'percent') return Number(t) / 100;
  // a size: a bare number is GiB, as the control's label says
  if (s.kind === 'bytes') { const b = /^[\\d.]+$/.test(t) ? Number(t) * 2 ** 30 : P.parseBytes(t); return b === undefined ? NaN : b; }
  return t;
}
function inputs() {
  const i = { ...P.DEFAULT_INPUTS, prompt: S.inputs.prompt };
  const given = [];
  for (const [k, s] of SPECS) {
    const v = read(k, s);
    // a control left at its default (or empty) is not given: a contradiction is refused only between inputs a person set
    if (v === undefined) { if (s.kind === 'int' && s.default !== undefined) i[k] = NaN; continue; }
    i[k] = v;
    if (shown($(k)) && v !== false && String(v) !== String(s.default)) given.push(k);
  }
  if (i.mode === 'train') i.context = undefined;
  i.given = given;
  return i;
}
function model() {
  const v = $('model').value;
  if (v !== '__pasted') return P.catalogueModel(v);
  return P.parseConfigText($('config').value, 'pasted config.json', S.model.name ?? 'pasted');
}
function machine(i) {
  const v = $('gpu').value;
  const mc = v === '__bench' ? { ...S.gpu.machine } : v === '__memory' ? P.machineFromMemory($('gpuMemory').value) : P.machineFromCatalogue(v);
  mc.hostMemoryBytes = i.hostMemory;
  return mc;
}
function table(head, rows) {
  return '<table><tr>' + head.map((h) => '<th>' + escText(h) + '</th>').join('') + '</tr>' +
    rows.map((r) => '<tr>' + r.map((c, k) => '<td' + (/^-?[\\d.]+$/.test(String(c)) ? ' class="n"' : k === r.length - 1 && String(c).length > 20 ? ' class="how"' : '') + '>' + escText(c) + '</td>').join('') + '</tr>').join('') + '</table>';
}
const PARTS = [['parametersBytes', 'parameters', '#0969da'], ['gradientsBytes', 'gradients', '#8250df'], ['optimizerBytes', 'optimizer states', '#bc4c00'],
  ['optimizerTemporariesBytes', 'optimizer temporaries', '#fb8f44'], ['activationsBytes', 'activations', '#1a7f37'], ['autocastCacheBytes', 'autocast weight cache', '#4ac26b'],
  ['logitsBytes', 'logits', '#bf3989'], ['kvCacheBytes', 'KV cache', '#9a6700'], ['workspaceBytes', 'workspace', '#d4a72c'], ['overheadBytes', 'overhead', '#57606a']];
function update() {
  const mode = $('mode').value;
  for (const el of document.querySelectorAll('label.train')) el.style.display = mode === 'train' ? '' : 'none';
  for (const el of document.querySelectorAll('label.infer')) el.style.display = mode === 'infer' ? '' : 'none';
  $('gpuMemoryLabel').style.display = $('gpu').value === '__memory' ? '' : 'none';
  let r;
  try {
    const i = inputs();
    const g = $('gpu').value;
    const prefix = ['gpumem', 'plan', '--model', $('model').value === '__pasted' ? 'config.json' : $('model').value,
      ...(g === '__memory' ? ['--gpu-memory', $('gpuMemory').value] : g === '__bench' ? ['--from-bench', 'bench.json'] : ['--gpu', g])];
    r = P.planAsked(model(), i, machine(i), prefix);
  } catch (e) {
    $('error').textContent = String(e.message || e);
    $('result').style.display = 'none';
    window.gpumemPlanResult = undefined;
    return;
  }
  $('error').textContent = '';
  $('result').style.display = '';
  window.gpumemPlanResult = r;
  const s = r.serving;
  $('fits').className = 'fits ' + (r.fits ? 'yes' : 'no');
  $('fits').textContent = s
    ? (s.starts ? 'starts' : 'does not start') + ': KV cache ' + s.kvTokens + ' tokens (' + s.kvBlocks + ' blocks of ' + s.blockSize + '); maximum concurrency for ' + s.maxModelLen + ' tokens per request: ' + s.maxConcurrency.toFixed(2) + 'x'
    : r.fits ? 'fits: ' + gib(r.marginBytes) + ' GiB to spare' : 'does not fit: ' + gib(-r.marginBytes) + ' GiB short';
  $('total').textContent = gib(r.perGpu.totalBytes);
  $('capacity').textContent = gib(r.capacityBytes);
  $('summary').textContent = r.model.name + ', ' + (r.model.parameters / 1e9).toFixed(2) + 'B parameters; ' + r.machine.name;
  $('lines').innerHTML = table(['line', 'GiB', 'GB', 'how'], [...r.lines.map((l) => [l.name, gib(l.bytes), gb(l.bytes), l.note]),
    ['total', gib(r.perGpu.totalBytes), gb(r.perGpu.totalBytes), ''], ['capacity', gib(r.capacityBytes), gb(r.capacityBytes), r.machine.capacitySource],
    ['max_memory_allocated', gib(r.perGpu.allocatedPeakBytes), gb(r.perGpu.allocatedPeakBytes), 'what PyTorch reports: tensors only'],
    ['max_memory_reserved', gib(r.perGpu.reservedPeakBytes), gb(r.perGpu.reservedPeakBytes), 'allocated plus the caching allocator fragmentation']]);
  $('suggestions').innerHTML = r.suggestions.length
    ? '<table><tr><th></th><th>change</th><th>GiB per GPU</th><th>GiB to spare</th><th>cost</th><th>why, and the command</th></tr>' +
      r.suggestions.map((x, k) => '<tr><td><button type="button" class="apply" data-k="' + k + '">apply</button></td><td>' + escText(x.flags.join(' ')) + '</td><td class="n">' + gib(x.bytesPerGpu) +
        '</td><td class="n">' + gib(x.headroomBytes) + '</td><td class="n">' + (x.cost * 100).toFixed(1) + '%</td><td class="how">' + escText(x.reason) + '<br><code>' + escText(x.command) + '</code></td></tr>').join('') + '</table>'
    : '<p class="note">' + (r.fits ? 'none needed' : 'no set of up to three changes makes it fit') + '</p>';
  for (const b of document.querySelectorAll('button.apply')) b.addEventListener('click', () => apply(r.suggestions[Number(b.dataset.k)]));
  const l = r.largest;
  $('largest').textContent = [l.batch !== undefined ? 'batch ' + l.batch : '', l.seq !== undefined ? 'sequence ' + l.seq : '', l.context !== undefined ? 'context ' + l.context + ' tokens' : ''].filter(Boolean).join('; ') || 'nothing fits even at batch 1';
  $('notes').innerHTML = r.notes.map((n) => '<p class="note">' + escText(n) + '</p>').join('');
  const datasets = PARTS.filter(([k]) => r.atPeak[k] > 0).map(([k, label, color]) => ({ label, data: [Number(gib(r.atPeak[k])), null], backgroundColor: color, stack: 'm' }));
  datasets.push({ label: 'capacity', data: [null, Number(gib(r.capacityBytes))], backgroundColor: '#d0d7de', stack: 'm' });
  if (!chart)
    chart = new Chart($('bar'), { type: 'bar', data: { labels: ['this plan', 'capacity'], datasets },
      options: { indexAxis: 'y', responsive: true, maintainAspectRatio: false, animation: false, scales: { x: { stacked: true, title: { display: true, text: 'GiB (2^30 bytes)' } }, y: { stacked: true } } } });
  else { chart.data.datasets = datasets; chart.update(); }
  window.gpumemCharts = [chart];
}
/** A suggestion's inputs set on their controls (the schema's names are the controls' ids), then re-planned. */
function apply(sg) {
  for (const [k, v] of Object.entries(sg.set)) {
    const s = P.SCHEMA[k];
    const el = $(k);
    if (!s || !el) continue;
    if (s.kind === 'flag') el.checked = !!v;
    else el.value = shownValue(k, s, v);
  }
  update();
}
for (const el of document.querySelectorAll('select, input, textarea')) el.addEventListener('input', update);
update();
`;

/** The interactive plan page, self-contained (Chart.js and the planner inlined). */
export function renderPlanPage(state: PlanPageState): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpumem plan</title><style>${CSS}</style></head>
<body><h1>gpumem plan</h1><p class="note">What an LLM needs per GPU. Every control re-plans here in the page with the planner the command line runs (no network, no GPU). GiB = 2^30 bytes, GB = 10^9.</p>
<form onsubmit="return false">${CONTROLS}</form>
<p id="error" class="error"></p>
<div id="result"><p id="summary" class="note"></p><p id="fits" class="fits"></p>
<p>peak <b id="total"></b> GiB of <span id="capacity"></span> GiB per GPU</p>
<figure><canvas id="bar" role="img" aria-label="memory of the most-loaded GPU against capacity"></canvas></figure>
<h2>Most-loaded GPU at the peak</h2><div id="lines"></div>
<h2>The cheapest changes that make it fit</h2><div id="suggestions"></div>
<h2>Largest that fits</h2><p id="largest"></p>
<h2>Notes</h2><div id="notes"></div></div>
<script>${chartLibrary()}</script>
<script>${planBundle()}</script>
<script>const GPUMEM_STATE = ${scriptJson(state)};
${APP}</script>
</body></html>
`;
}
