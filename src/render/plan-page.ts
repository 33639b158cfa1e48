/**
 * The interactive plan page (`gpumem plan --html FILE`, `gpumem plan --serve`): the planner runs in the browser
 * (the bundle of src/plan/browser.ts), so the controls work offline. Moving a control re-plans from the same inputs
 * the CLI takes; the page shows the peak's lines, a stacked bar against capacity, whether it fits (or, serving, the
 * KV cache the engine sizes), the changes that would make it fit and the largest batch and context that fit.
 */
import { readFileSync } from 'node:fs';
import type { PlanInputs } from '../plan/inputs.js';
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

const CONTROLS = `
<label>model<select id="model"></select></label>
<label>mode<select id="mode"><option>train</option><option>infer</option></select></label>
<label>GPU<select id="gpu"></select></label>
<label>GPUs<input id="gpus" type="number" min="1"></label>
<label>batch<input id="batch" type="number" min="1"></label>
<label class="train">sequence<input id="seq" type="number" min="1"></label>
<label class="train">precision<select id="precision"></select></label>
<label class="train">attention<select id="attention"><option>sdpa</option><option>eager</option><option>flash</option></select></label>
<label class="train">recompute<select id="recompute"><option>none</option><option>selective</option><option>full</option><option value="op">op (per-op)</option></select></label>
<label class="train">optimizer<select id="optimizer"><option>adamw</option><option>adam</option><option>sgd</option><option>adamw8bit</option><option>paged-adamw</option><option>paged-adamw8bit</option></select></label>
<label class="train">gradient accumulation<input id="gradAccum" type="number" min="1"></label>
<label class="train">loss<select id="loss"><option>standard</option><option>chunked</option><option>fused</option></select></label>
<label class="train">LoRA rank (empty: full fine-tuning)<input id="lora" type="number" min="1"></label>
<label class="train">LoRA targets<input id="loraTargets" placeholder="PEFT's default, or all-linear"></label>
<label class="train">LoRA dtype<select id="loraDtype"><option value="">PEFT's default</option><option>fp32</option><option>bf16</option><option>fp16</option></select></label>
<label class="train">LoRA dropout<input id="loraDropout" type="number" min="0" step="0.05" placeholder="0"></label>
<label class="train">base weights<select id="baseWeights"><option value="">the checkpoint's</option><option>fp32</option><option>bf16</option><option>fp16</option><option>nf4</option><option>fp4</option><option>int8</option></select></label>
<label class="train check"><span><input type="checkbox" id="dora"> DoRA</span></label>
<label class="train check"><span><input type="checkbox" id="doubleQuant"> double quantisation</span></label>
<label class="train">bitsandbytes release (4-bit base)<input id="bnbVersion" placeholder="current (0.43 or later)"></label>
<label class="train check"><span><input type="checkbox" id="optimizerInBackward"> optimizer in backward</span></label>
<label class="train check"><span><input type="checkbox" id="activationOffload"> activation offloading</span></label>
<label class="train">torch.compile<select id="compile"><option value="">no</option><option value="all">blocks and loss</option><option value="blocks">blocks only</option></select></label>
<label>host memory (GiB, empty: not checked)<input id="hostMemory" type="number" min="0" step="any"></label>
<label class="train">ZeRO<select id="zero"><option value="0">0</option><option value="1">1</option><option value="2">2</option><option value="3">3 (FSDP)</option></select></label>
<label class="train">offload<select id="offload"><option>none</option><option>optimizer</option><option>params</option></select></label>
<label class="train">framework<select id="framework"><option>pytorch</option><option>megatron</option><option>litgpt</option></select></label>
<label>tensor parallel<input id="tp" type="number" min="1"></label>
<label>pipeline parallel<input id="pp" type="number" min="1"></label>
<label class="infer">engine<select id="engine"><option>hf</option><option>vllm</option><option>sglang</option></select></label>
<label class="infer">engine release<input id="engineVersion" placeholder="newest" size="6"></label>
<label class="infer">no CUDA graphs<input id="enforceEager" type="checkbox"></label>
<label class="infer">context<input id="context" type="number" min="2"></label>
<label class="infer">new tokens<input id="newTokens" type="number" min="1"></label>
<label class="infer">weights<select id="weights"><option>bf16</option><option>fp16</option><option>fp8</option><option>int8</option><option>int4</option><option>fp32</option></select></label>
<label class="infer">KV cache<select id="kvDtype"><option>bf16</option><option>fp16</option><option>fp8</option><option>int8</option><option>int4</option><option>fp32</option></select></label>
<textarea id="config" placeholder="paste a Hugging Face config.json here and choose 'pasted config.json' as the model"></textarea>`;

/** The page's script: reads the controls into PlanInputs, plans with the bundled planner, renders the result. */
const APP = `
const P = gpumemPlan;
const S = GPUMEM_STATE;
const $ = (id) => document.getElementById(id);
const gib = (b) => (b / 2 ** 30).toFixed(2);
const gb = (b) => (b / 1e9).toFixed(2);
const escText = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const NUMBERS = ['gpus', 'batch', 'seq', 'tp', 'pp', 'newTokens', 'context', 'gradAccum'];
const CHOICES = ['mode', 'precision', 'attention', 'recompute', 'offload', 'framework', 'engine', 'weights', 'kvDtype', 'optimizer', 'loss'];
// controls that may be left empty (undefined) or unchecked: given only when set
const OPTIONAL_NUMBERS = ['lora', 'loraDropout'];
const OPTIONAL_TEXT = ['loraTargets', 'loraDtype', 'baseWeights', 'bnbVersion'];
const CHECKS = ['dora', 'doubleQuant', 'optimizerInBackward', 'activationOffload'];
for (const name of Object.keys(P.MODEL_CONFIGS)) $('model').add(new Option(name, name));
$('model').add(new Option('pasted config.json', '__pasted'));
for (const [name, g] of Object.entries(P.GPUS)) $('gpu').add(new Option(g.name, name));
if (S.gpu.machine) $('gpu').add(new Option(S.gpu.machine.name, '__bench'));
for (const p of Object.keys(P.PRECISIONS)) $('precision').add(new Option(p, p));
for (const [id, text] of Object.entries(P.PRECISIONS)) $('precision').querySelector('option[value="' + id + '"]').title = text;
const i0 = S.inputs;
$('model').value = S.model.catalogue ?? '__pasted';
if (S.model.configText) $('config').value = S.model.configText;
$('gpu').value = S.gpu.machine ? '__bench' : S.gpu.catalogue;
for (const id of NUMBERS) if (i0[id] !== undefined) $(id).value = i0[id];
if (i0.context === undefined) $('context').value = i0.prompt + i0.newTokens;
for (const id of CHOICES) $(id).value = i0[id] === 'adam8bit' ? 'adamw8bit' : i0[id];
for (const id of [...OPTIONAL_NUMBERS, ...OPTIONAL_TEXT]) if (i0[id] !== undefined) $(id).value = i0[id];
for (const id of CHECKS) $(id).checked = !!i0[id];
// torch.compile: off, the blocks and the loss (a bare --compile), or the blocks only
$('compile').value = i0.compile === true ? 'all' : i0.compile || '';
if (i0.hostMemoryBytes !== undefined) $('hostMemory').value = i0.hostMemoryBytes / 2 ** 30;
if (i0.flashAttention) $('attention').value = 'flash';
$('zero').value = String(i0.fsdp ? 3 : i0.zero);
$('engineVersion').value = i0.engineVersion ?? '';
$('enforceEager').checked = !!i0.enforceEager;
let chart;
const shown = (id) => $(id).closest('label').style.display !== 'none';
function inputs() {
  const i = { ...S.inputs, flashAttention: false };
  // a field left empty reads as NaN, so that the planner's checks refuse it as the CLI refuses a missing number
  for (const id of NUMBERS) i[id] = $(id).value === '' ? NaN : Number($(id).value);
  for (const id of CHOICES) i[id] = $(id).value;
  for (const id of OPTIONAL_NUMBERS) i[id] = $(id).value === '' ? undefined : Number($(id).value);
  for (const id of OPTIONAL_TEXT) i[id] = $(id).value === '' ? undefined : $(id).value;
  for (const id of CHECKS) i[id] = $(id).checked;
  i.compile = $('compile').value || false;
  i.hostMemoryBytes = $('hostMemory').value === '' ? undefined : Number($('hostMemory').value) * 2 ** 30;
  i.zero = Number($('zero').value);
  i.fsdp = false;
  if (i.mode === 'train') i.context = undefined;
  // the controls set on the page, as the options given on a command line
  i.given = [...NUMBERS, ...CHOICES, 'zero', ...OPTIONAL_NUMBERS, ...OPTIONAL_TEXT, ...CHECKS, 'compile'].filter((id) => shown(id) && (CHECKS.includes(id) ? $(id).checked : $(id).value !== ''));
  if (i.mode === 'infer') i.given = i.given.filter((id) => id !== 'context' || $('context').value !== '');
  // the engine's release and eager mode apply to vllm and sglang only
  i.engineVersion = i.engine === 'hf' ? undefined : $('engineVersion').value.trim() || undefined;
  i.enforceEager = i.engine !== 'hf' && $('enforceEager').checked;
  return i;
}
function model() {
  const v = $('model').value;
  if (v !== '__pasted') return P.catalogueModel(v);
  return P.parseConfigText($('config').value, 'pasted config.json', S.model.name ?? 'pasted');
}
function machine(i) {
  const v = $('gpu').value;
  const mc = v === '__bench' ? { ...S.gpu.machine } : P.machineFromCatalogue(v);
  mc.hostMemoryBytes = i.hostMemoryBytes;
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
  for (const el of document.querySelectorAll('.train')) el.style.display = mode === 'train' ? '' : 'none';
  for (const el of document.querySelectorAll('.infer')) el.style.display = mode === 'infer' ? '' : 'none';
  let r;
  try {
    const i = inputs();
    r = P.plan(model(), P.planOptionsFrom(i), machine(i));
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
  $('suggestions').innerHTML = r.suggestions.length ? table(['change', 'fits', 'new total GiB', 'cost'], r.suggestions.map((x) => [x.change, x.fits ? 'yes' : 'no', gib(x.totalBytes), x.cost])) : '<p class="note">none needed</p>';
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
<h2>Changes that would make it fit</h2><div id="suggestions"></div>
<h2>Largest that fits</h2><p id="largest"></p>
<h2>Notes</h2><div id="notes"></div></div>
<script>${chartLibrary()}</script>
<script>${planBundle()}</script>
<script>const GPUMEM_STATE = ${scriptJson(state)};
${APP}</script>
</body></html>
`;
}
