/**
 * The GPU catalogue: every entry has a source with its text quoted; the capacities are what the runtime reports, not
 * the size as sold, and agree with the traces they cite (../shared/traces, read in place: the figures there were
 * written by the runtimes of other projects' machines, never by gpumem) and with gpumem's own H200 measurement; names
 * and aliases resolve whatever their case and punctuation; a capacity the user gives becomes a spec that says what is
 * assumed, and nonsense sizes are refused naming the option.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { ErrorCode, InvalidArgumentError, isGpuError } from '../errors.js';
import { GiB, MiB } from '../units.js';
import { hostLinkGBps, identifyDevice } from './devices.js';
import { ASSUMED_LINK, catalogueGpu, closestGpus, cudaContextFor, GPUS, gpuFromMemory, gpuKey, parseGpuMemory } from './gpus.js';

/** ../shared/traces beside the checkout, or beside the folder of worktrees that holds it. */
const ROOT = ['../../../shared/traces/', '../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync);
const skip = ROOT ? false : '../shared/traces is absent (the shared traces sit beside the checkout)';
const REPO = new URL('../../', import.meta.url).pathname;

/** Does the quoted text carry `bytes`: as bytes, KiB (rocminfo's KB), whole MiB (deviceQuery's MBytes) or GiB to 0.01? */
function quotes(quote: string, bytes: number): boolean {
  return (quote.match(/\d+(?:\.\d+)?/g) ?? []).some(
    (n) => Number(n) === bytes || Number(n) * 1024 === bytes || Number(n) === Math.floor(bytes / MiB) || n === (bytes / GiB).toFixed(2),
  );
}

test('every catalogue GPU has a source: the figure quoted where it was printed, and a derived figure says how', () => {
  for (const [key, g] of Object.entries(GPUS)) {
    assert.ok(g.evidence.length > 0, `${key}: evidence`);
    for (const e of g.evidence) assert.ok(e.where.trim() !== '' && e.quote.trim() !== '', `${key}: where and quote`);
    assert.ok(g.memorySource.trim() !== '', `${key}: memorySource`);
    assert.deepEqual(g.assumed, [], `${key}: nothing assumed`);
    if (g.memoryFigure === 'derived') assert.match(g.memorySource, /^derived: /, `${key} says it is derived`);
    else {
      assert.equal(g.memoryFigure, 'runtime', key);
      assert.doesNotMatch(g.memorySource, /derived/, key);
      assert.ok(quotes(g.evidence[0]!.quote, g.memoryBytes), `${key}: "${g.evidence[0]!.quote}" carries ${g.memoryBytes}`);
    }
  }
});

test('capacities are what the runtime reports: below the size as sold, and the host link is the device catalogue one', () => {
  for (const [key, g] of Object.entries(GPUS)) {
    const id = identifyDevice(g.deviceName!, g.memoryBytes);
    assert.ok(id.known, `${key}: ${g.deviceName} identified (${id.known ? '' : id.reason})`);
    assert.ok(id.memoryGB !== undefined, `${key}: the size as sold is found from the runtime total`);
    const sold = id.memoryGB * GiB;
    // the labels count GiB; the runtime keeps 1-9% of it for itself
    assert.ok(g.memoryBytes < sold && g.memoryBytes > 0.9 * sold, `${key}: ${g.memoryBytes} is 90-100% of ${id.memoryGB} GiB`);
    assert.notEqual(g.memoryBytes, id.memoryGB * 1e9, `${key}: not the marketing figure`);
    assert.equal(g.vendor, id.model.vendor, key);
    assert.deepEqual(g.link, id.model.link, `${key}: link`);
    assert.equal(g.hostLinkGBps, hostLinkGBps(id.model.link), `${key}: link bandwidth`);
    assert.ok(g.memoryGBps !== undefined && g.memoryGBps > 0, `${key}: memory bandwidth`);
  }
  // the examples the figures are about: an H100 80GB reports about 79.2 GiB, not 80 GB or 80 GiB
  assert.equal((GPUS.h100!.memoryBytes / GiB).toFixed(2), '79.22');
  assert.equal(GPUS.gb200!.link.kind, 'nvlink-c2c');
  assert.equal(GPUS.h100!.hostLinkGBps, 63, 'PCIe 5.0 x16');
  assert.equal(GPUS['rtx-4090']!.hostLinkGBps, 31.5, 'PCIe 4.0 x16');
});

/** The devices a Kineto trace's deviceProperties record. */
function traceDevices(file: string): Array<{ name: string; totalGlobalMem: number }> {
  const raw = readFileSync(ROOT + file);
  const json = JSON.parse((file.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8')) as {
    deviceProperties?: Array<{ name: string; totalGlobalMem: number }>;
  };
  return json.deviceProperties ?? [];
}

/** Every totalGlobalMem a Kineto trace records for a device of that name. */
function traceTotals(file: string, name: string): number[] {
  return traceDevices(file)
    .filter((d) => d.name === name)
    .map((d) => d.totalGlobalMem);
}

/** A cited trace: `owner/repo@commit path` is ../shared/traces/repo/path, under the repository's name (SOURCES.md there). */
function tracePath(where: string): string | undefined {
  const m = /^[\w.-]+\/([\w.-]+)@[0-9a-f]+ (\S+\.json(?:\.gz)?)/.exec(where);
  return m && existsSync(`${ROOT}${m[1]}/${m[2]}`) ? `${m[1]}/${m[2]}` : undefined;
}

test('capacities agree with the profiler traces they cite, and the quotes with the traces (read in place)', { skip }, () => {
  let quoted = 0;
  let compared = 0;
  for (const [key, g] of Object.entries(GPUS)) {
    g.evidence.forEach((e, i) => {
      const file = tracePath(e.where);
      const m = /(?:"name": "([^"]*)", )?"totalGlobalMem": (\d+)/.exec(e.quote);
      if (!file || !m) return;
      const total = Number(m[2]);
      const devices = traceDevices(file).filter((d) => d.totalGlobalMem === total && (m[1] === undefined || d.name === m[1]));
      assert.ok(devices.length > 0, `${key}: ${file} records "${e.quote}"`);
      quoted++;
      // a sibling part's trace (the derivations below use those) says nothing of this part's figure
      const id = identifyDevice(devices[0]!.name, total);
      const own = identifyDevice(g.deviceName!, g.memoryBytes);
      if (id.known && own.known && (id.model !== own.model || id.memoryGB !== own.memoryGB)) return;
      const off = Math.abs(g.memoryBytes - total) / total;
      // the figure an entry is printed from is its own; another driver's print of the same part differs by up to 0.5%
      assert.ok(i === 0 && g.memoryFigure === 'runtime' ? off === 0 : off <= 0.005, `${key}: ${g.memoryBytes} vs ${total} in ${file}`);
      compared++;
    });
  }
  assert.deepEqual([quoted, compared], [20, 16], "quotes found in their traces, figures compared with their own part's");
});

test('derived capacities follow from the traces by the rule they state', { skip }, () => {
  // AMD: HIP reports the HBM less 16 MiB (MI210: 64 GiB, MI300X: 192 GiB), so the MI325X and MI355X are 256 and 288 GiB less 16 MiB
  const mi210 = traceTotals('TraceLens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz', 'AMD Instinct MI210')[0]!;
  const mi300x = traceTotals('TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz', 'AMD Instinct MI300X')[0]!;
  assert.equal(mi210 + 16 * MiB, 64 * GiB);
  assert.equal(mi300x + 16 * MiB, 192 * GiB);
  assert.equal(GPUS.mi325x!.memoryBytes + 16 * MiB, 256 * GiB);
  assert.equal(GPUS.mi355x!.memoryBytes + 16 * MiB, 288 * GiB);
  assert.equal(GPUS.w7900!.memoryBytes + 16 * MiB, 48 * GiB);
  // GB200: nvidia-smi's 189471 MiB less what the driver keeps on a B200 (183359 MiB in nvidia-smi, NVIDIA/TensorRT-LLM#10278)
  const b200 = traceTotals('TraceLens/tests/traces/b200/eager_trace.json.gz', 'NVIDIA B200')[0]!;
  assert.equal(GPUS.gb200!.memoryBytes, 189471 * MiB - (183359 * MiB - b200));
});

test('NVIDIA boards derived from a sibling with the same memory take its figure', () => {
  for (const [key, sibling] of [
    ['a100-80-pcie', 'a100-80'],
    ['h100-pcie', 'h100'],
    ['h800', 'h100'],
    ['v100-16-pcie', 'v100-16'],
  ] as const) {
    assert.equal(GPUS[key]!.memoryFigure, 'derived', key);
    assert.equal(GPUS[key]!.memoryBytes, GPUS[sibling]!.memoryBytes, `${key} is ${sibling}`);
  }
  // the V100 PCIe boards have no NVLink; the SXM2 boards 150 GB/s each way
  assert.equal(GPUS['v100-16-pcie']!.peerGBps, undefined);
  assert.equal(GPUS['v100-32-pcie']!.peerGBps, undefined);
  assert.equal(GPUS['v100-16']!.peerGBps, 150);
  // the MI100 reports its 32 GiB of HBM2 less 16 MiB, as the other Instinct parts do
  assert.equal(GPUS.mi100!.memoryBytes + 16 * MiB, 32 * GiB);
});

test("the H200's capacity is gpumem's own measurement on one H200", () => {
  const info = JSON.parse(readFileSync(`${REPO}docs/evidence/2026-12-01-1x-h200/info.json`, 'utf8')) as {
    devices: Array<{ name: string; totalBytes: number }>;
  };
  const h200 = info.devices.find((d) => d.name === 'NVIDIA H200')!;
  assert.equal(GPUS.h200!.memoryBytes, h200.totalBytes);
  assert.equal(GPUS['h200-nvl']!.memoryBytes, h200.totalBytes, 'the NVL board is taken as the same');
});

/** [what a user types, the catalogue key it is]. */
const NAMES: Array<[string, string]> = [
  ['4090', 'rtx-4090'],
  ['rtx4090', 'rtx-4090'],
  ['rtx-4090', 'rtx-4090'],
  ['RTX 4090', 'rtx-4090'],
  ['NVIDIA GeForce RTX 4090', 'rtx-4090'],
  ['3090', 'rtx-3090'],
  ['RTX_5090', 'rtx-5090'],
  ['a100', 'a100-80'],
  ['A100', 'a100-80'],
  ['NVIDIA A100-SXM4-80GB', 'a100-80'],
  ['a100 80gb pcie', 'a100-80-pcie'],
  ['A100-40GB', 'a100-40'],
  ['NVIDIA A100-PCIE-40GB', 'a100-40'],
  ['h100', 'h100'],
  ['H100 SXM5', 'h100'],
  ['NVIDIA H100 80GB HBM3', 'h100'],
  ['H100 PCIe', 'h100-pcie'],
  ['h100.nvl', 'h100-nvl'],
  ['H200 NVL', 'h200-nvl'],
  ['gb200', 'gb200'],
  ['mi300', 'mi300x'],
  ['AMD Instinct MI300X', 'mi300x'],
  ['MI250', 'mi250x'],
  ['Radeon PRO W7900', 'w7900'],
  ['7900XTX', 'rx-7900-xtx'],
  ['AMD Radeon RX 7900 XTX', 'rx-7900-xtx'],
  ['v100', 'v100-16'],
  ['V100-32', 'v100-32'],
  ['v100-16', 'v100-16'],
  ['Tesla V100-SXM2-32GB', 'v100-32'],
  ['Tesla V100-PCIE-16GB', 'v100-16-pcie'],
  ['v100 pcie', 'v100-16-pcie'],
  ['T4', 't4'],
  ['Tesla T4', 't4'],
  ['A6000', 'rtx-a6000'],
  ['RTX 6000 Ada', 'rtx-6000-ada'],
  ['NVIDIA RTX 6000 Ada Generation', 'rtx-6000-ada'],
  ['A800', 'a800'],
  ['H800', 'h800'],
  ['MI100', 'mi100'],
  ['RTX 3060', 'rtx-3060'],
  ['2080 Ti', 'rtx-2080-ti'],
  ['rtx3080', 'rtx-3080'],
  ['4080', 'rtx-4080'],
  ['P100', 'p100'],
  ['Tesla P40', 'p40'],
];

test('names resolve whatever their case and punctuation, and no name is two GPUs', () => {
  for (const [name, key] of NAMES) assert.equal(catalogueGpu(name), GPUS[key], name);
  const seen = new Map<string, string>();
  for (const [key, g] of Object.entries(GPUS)) {
    for (const n of [key, ...g.aliases, g.deviceName!]) {
      assert.equal(catalogueGpu(n), g, `${n} is ${key}`);
      const k = gpuKey(n);
      assert.ok(!seen.has(k) || seen.get(k) === key, `${n} (${key}) and ${seen.get(k)} share "${k}"`);
      seen.set(k, key);
    }
  }
  // the names the planner, its page and its tests already use stay
  for (const key of ['h200', 'h100', 'h100-pcie', 'a100-80', 'a100-40', 'l40s', 'rtx-4090', 'mi300x', 'mi325x', 'mi250x', 'mi210']) assert.ok(GPUS[key], key);
});

test('an unknown name is refused with the closest names and the way to give any other GPU', () => {
  for (const [name, first] of [
    ['h100x', 'h100'],
    ['rtx 4070', 'rtx-4080'],
    ['mi300a', 'mi300x'],
    ['B300', 'b200'],
  ] as const) {
    assert.throws(
      () => catalogueGpu(name),
      (e: unknown) => isGpuError(e) && e.code === ErrorCode.BAD_INPUT && e.message.includes(`Closest: ${first}`) && /--gpu-memory/.test(e.message),
      name,
    );
    assert.equal(closestGpus(name)[0], first, name);
  }
  assert.throws(
    () => catalogueGpu(''),
    (e: unknown) => isGpuError(e) && e.code === ErrorCode.BAD_INPUT,
  );
});

test('--gpu-memory takes sizes with binary and decimal units, or bytes', () => {
  for (const [text, bytes] of [
    ['24GiB', 24 * GiB],
    ['24 GiB', 24 * GiB],
    ['24gib', 24 * GiB],
    ['24G', 24 * GiB],
    ['1.5GiB', 1.5 * GiB],
    ['24GB', 24e9],
    ['81920MiB', 80 * GiB],
    ['24576MB', 24576e6],
    ['25769803776', 24 * GiB],
    ['25769803776 bytes', 24 * GiB],
    [' 80GB ', 80e9],
  ] as const)
    assert.equal(parseGpuMemory(text), bytes, text);
});

test('sizes no GPU has are refused with InvalidArgumentError naming the option', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['', ErrorCode.INVALID_ARGUMENT, /must be a memory size such as 24GiB/],
    ['abc', ErrorCode.INVALID_ARGUMENT, /got "abc"/],
    ['-24GiB', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
    ['24 GiB GiB', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
    ['1e9', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
    ['NaN', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
    ['Infinity', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
    ['24', ErrorCode.INVALID_SIZE, /24 bytes, less than any GPU has .*give a unit, e\.g\. 24GiB or 24GB/],
    ['0', ErrorCode.INVALID_SIZE, /0 bytes, less than any GPU has/],
    ['256MiB', ErrorCode.INVALID_SIZE, /less than any GPU has/],
    ['24TB', ErrorCode.INVALID_SIZE, /21\.8 TiB, more than any GPU has/],
    ['9999999999999999999999GiB', ErrorCode.INVALID_ARGUMENT, /must be a memory size/],
  ];
  for (const option of ['--gpu-memory', '--memory']) {
    for (const [text, code, message] of cases) {
      assert.throws(
        () => gpuFromMemory(text, option),
        (e: unknown) => e instanceof InvalidArgumentError && e.code === code && e.message.startsWith(`${option} `) && message.test(e.message),
        `${option} ${JSON.stringify(text)}`,
      );
    }
  }
});

test('a capacity the user gives makes a spec that says the model is unknown and which link it assumes', () => {
  const g = gpuFromMemory('24GiB');
  assert.equal(g.memoryBytes, 24 * GiB);
  assert.equal(g.memoryFigure, 'given');
  assert.equal(g.vendor, 'unknown');
  assert.equal(g.deviceName, undefined);
  assert.equal(g.memoryGBps, undefined);
  assert.deepEqual(g.evidence, []);
  assert.match(g.name, /24\.00 GiB .*--gpu-memory 24GiB.*model unknown.*host link assumed PCIe 4\.0 x16/);
  assert.match(g.memorySource, /given by --gpu-memory 24GiB.*total the runtime reports/);
  assert.deepEqual(g.link, ASSUMED_LINK);
  assert.equal(g.hostLinkGBps, 31.5);
  assert.ok(g.assumed.some((a) => /^host link: PCIe 4\.0 x16, 31\.5 GB\/s/.test(a)));
  assert.ok(g.assumed.some((a) => /^memory bandwidth: unknown/.test(a)));
  assert.equal(gpuFromMemory('80GB').memoryBytes, 80e9, 'decimal units are taken as given, not converted');
});

test('CUDA contexts: each figure quoted from where it was published; a part without one takes the smallest, marked assumed', () => {
  const withFigure = Object.values(GPUS).filter((g) => g.cudaContext);
  assert.ok(withFigure.length >= 3);
  for (const g of withFigure) {
    const c = g.cudaContext!;
    assert.ok(c.bytes > 100 * MiB && c.bytes < 2 * GiB, g.name);
    assert.ok(c.evidence.length > 0 && c.evidence.every((e) => e.where && e.quote), g.name);
    // the quoted text holds the figure in MiB
    assert.ok(
      c.evidence.some((e) => e.quote.includes(`${Math.round(c.bytes / MiB)} MiB`)),
      g.name,
    );
    if (c.figure === 'derived') assert.match(c.source, /^derived/, g.name);
  }
  // found by key, alias, runtime name and catalogue name alike
  for (const n of ['h100', 'h100-sxm', 'NVIDIA H100 80GB HBM3', GPUS.h100!.name]) assert.equal(cudaContextFor(n).bytes, GPUS.h100!.cudaContext!.bytes, n);
  const smallest = Math.min(...withFigure.map((g) => g.cudaContext!.bytes));
  for (const n of ['rtx-3090', 'a GPU nobody makes', '']) {
    const c = cudaContextFor(n);
    assert.equal(c.bytes, smallest, n);
    assert.equal(c.assumed, true, n);
  }
  assert.equal(cudaContextFor('h200').assumed, false);
});
