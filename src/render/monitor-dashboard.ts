/**
 * The monitor's web page: self-contained (inline CSS and Chart.js), it polls the server's /api/history and draws
 * used memory per device over time, the processes on each device and the pools' figures.
 */
import { chartLibrary } from './html.js';

const CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #222; }
h1 { font-size: 1.3rem; margin: 0 0 .2rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
.sub { color: #666; margin-bottom: 1rem; }
table { border-collapse: collapse; } th, td { padding: .25rem .7rem; border-bottom: 1px solid #ddd; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; width: 120px; height: .7rem; background: #eee; vertical-align: middle; margin-right: .4rem; }
.bar > span { display: block; height: 100%; background: #3a7bd5; }
#status { color: #666; } #status.error { color: #b00; }
.warning { color: #9a6700; font-weight: 600; } .critical { color: #cf222e; font-weight: 700; } .ok { color: #1a7f37; }
#hostnote { color: #9a6700; }
.chart { max-width: 900px; height: 320px; }
`;

const SCRIPT = `
const fmt = (b) => { if (b === undefined || b === null) return 'n/a'; const u = ['B','KiB','MiB','GiB','TiB']; let i = 0; while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; } return (i ? b.toFixed(1) : String(b)) + ' ' + u[i]; };
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'})[c]);
const dur = (s) => { if (s === undefined || s === null) return '-'; if (s < 90) return Math.round(s) + ' s'; if (s < 5400) return Math.round(s / 60) + ' min'; if (s < 172800) return (s / 3600).toFixed(1) + ' h'; return (s / 86400).toFixed(1) + ' d'; };
const state = (f) => '<span class="' + f.state + '">' + f.state + '</span>';
const colors = ['#3a7bd5', '#d5573a', '#2e9e5b', '#9b59b6', '#e6a100', '#16a5a5', '#7f8c8d', '#c0392b'];
let chart;
function render(history) {
  const last = history[history.length - 1];
  if (!last) return;
  document.getElementById('sub').textContent = last.host + ' · backend ' + last.backend + (last.notice ? ' · ' + last.notice : '');
  document.getElementById('hostnote').textContent = last.backend === 'host' ? 'The host backend: these figures are the CPU memory of this machine standing in for a GPU, not GPU figures.' : '';
  document.getElementById('devices').innerHTML = '<tr><th>device</th><th>name</th><th class="num">used</th><th class="num">total</th><th class="num">free</th><th>use</th><th class="num">busy</th><th class="num">to OOM</th><th>state</th><th>source</th></tr>' +
    last.devices.map((d) => { const f = d.totalBytes ? d.usedBytes / d.totalBytes : 0; return '<tr data-device="' + d.index + '" data-state="' + d.forecast.state + '"><td>' + d.index + '</td><td>' + esc(d.name || '') + '</td><td class="num">' + fmt(d.usedBytes) + '</td><td class="num">' + fmt(d.totalBytes) + '</td><td class="num">' + fmt(d.freeBytes) + '</td><td><span class="bar"><span style="width:' + (100 * f).toFixed(1) + '%"></span></span>' + (100 * f).toFixed(1) + '%</td><td class="num">' + (d.utilizationPercent === undefined ? 'n/a' : d.utilizationPercent + '%') + '</td><td class="num">' + dur(d.forecast.timeToFullSeconds) + '</td><td>' + state(d.forecast) + '</td><td>' + esc(d.source) + (d.note ? ' (' + esc(d.note) + ')' : '') + '</td></tr>'; }).join('');
  const procs = last.devices.flatMap((d) => (d.processes || []).map((p) => '<tr><td>' + d.index + '</td><td class="num">' + p.pid + '</td><td>' + esc(p.name || '?') + '</td><td class="num">' + fmt(p.usedBytes) + '</td></tr>'));
  document.getElementById('processes').innerHTML = '<tr><th>device</th><th class="num">pid</th><th>process</th><th class="num">used</th></tr>' + (procs.join('') || '<tr><td colspan="4">none listed</td></tr>');
  document.getElementById('pools').innerHTML = '<tr><th>pool</th><th class="num">reserved</th><th class="num">allocated</th><th class="num">requested</th><th class="num">fragmentation</th><th class="num">segments</th><th class="num">to OOM</th><th>state</th></tr>' +
    (last.pools.map((p) => '<tr data-pool="' + esc(p.name) + '"><td>' + esc(p.name) + '</td><td class="num">' + fmt(p.reservedBytes) + '</td><td class="num">' + fmt(p.allocatedBytes) + '</td><td class="num">' + fmt(p.requestedBytes) + '</td><td class="num">' + p.fragmentation.toFixed(3) + '</td><td class="num">' + p.segments + '</td><td class="num">' + dur(p.forecast.timeToFullSeconds) + '</td><td>' + state(p.forecast) + '</td></tr>').join('') || '<tr><td colspan="8">no pool handed to this monitor</td></tr>');
  const labels = history.map((s) => s.time.slice(11, 19));
  const datasets = last.devices.map((d, i) => ({ label: 'device ' + d.index + ' used (GiB)', data: history.map((s) => { const x = s.devices.find((e) => e.index === d.index); return x ? x.usedBytes / 2 ** 30 : null; }), borderColor: colors[i % colors.length], pointRadius: 0, tension: 0 }));
  if (!chart) chart = new Chart(document.getElementById('usedChart'), { type: 'line', data: { labels, datasets }, options: { animation: false, maintainAspectRatio: false, scales: { y: { beginAtZero: true, title: { display: true, text: 'GiB used' } } } } });
  else { chart.data.labels = labels; chart.data.datasets = datasets; chart.update(); }
  document.getElementById('status').textContent = 'updated ' + last.time;
  document.getElementById('status').className = '';
}
async function poll() {
  try {
    const r = await fetch('api/history');
    if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
    render(await r.json());
  } catch (e) {
    document.getElementById('status').textContent = 'no answer from the monitor: ' + e.message;
    document.getElementById('status').className = 'error';
  }
}
poll();
setInterval(poll, INTERVAL_MS);
`;

/** The dashboard page, polling every `intervalMs`. */
export function dashboardPage(intervalMs: number): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpumem monitor</title><style>${CSS}</style></head>
<body>
<h1>gpumem monitor</h1>
<div class="sub" id="sub">waiting for the first sample</div>
<div id="hostnote"></div>
<div id="status">connecting</div>
<h2>Devices</h2><table id="devices"></table>
<h2>Used memory over time</h2><div class="chart"><canvas id="usedChart"></canvas></div>
<h2>Processes</h2><table id="processes"></table>
<h2>Pools</h2><table id="pools"></table>
<p class="sub">Also: <a href="metrics">metrics</a> (Prometheus), <a href="api/sample">api/sample</a>, <a href="api/history">api/history</a> (JSON, schema gpumem.monitor/1). Bytes are bytes; GiB = 2^30.</p>
<script>${chartLibrary()}</script>
<script>const INTERVAL_MS = ${Math.max(100, Math.round(intervalMs))};${SCRIPT}</script>
</body></html>`;
}
