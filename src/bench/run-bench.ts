/**
 * `gpumem bench`: the machine's own table of bandwidth and latency for every kind of memory and direction.
 * Runs the selected test groups on each selected device and returns the report (schema gpumem.bench/1).
 */
import { cpus, hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import type { DeviceInfo } from '../backend/backend.js';
import { numaNodes, pcieBandwidthGBps } from '../backend/sysfs.js';
import type { Runtime } from '../runtime/runtime.js';
import { BenchAborted, BenchContext, type BenchOptions } from './context.js';
import type { BenchEnvironment, BenchReport, BenchResult } from '../formats/bench-schema.js';
import { copyTests } from './suites/copies.js';
import { accessTests, cacheSweep, latencyTests, streamTests } from './suites/device-memory.js';
import { managedTests, zeroCopyTests } from './suites/host-visible.js';
import { allocTests, peerTests } from './suites/peer-alloc.js';
import { transferTests } from './suites/transfer.js';
import { safetensorsTests } from './suites/safetensors.js';
import { collectiveTests } from './suites/collectives.js';

/** Test groups, in the order they run. */
export const BENCH_TESTS = [
  'copy',
  'sm-copy',
  'peer',
  'collectives',
  'managed',
  'zero-copy',
  'stream',
  'cache',
  'access',
  'latency',
  'alloc',
  'transfer',
] as const;
export type BenchTest = (typeof BENCH_TESTS)[number];

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Theoretical peaks: the PCIe link from sysfs (generation and width, after encoding), HBM from bus width and clock. */
export function theoreticalPeaks(d: DeviceInfo): { linkGBps?: number; memoryGBps?: number; how: string } {
  const out: { linkGBps?: number; memoryGBps?: number; how: string } = { how: '' };
  const how: string[] = [];
  const gen = d.link?.maxGeneration ?? d.link?.generation;
  const width = d.link?.maxWidth ?? d.link?.width;
  if (gen !== undefined && width !== undefined) {
    const bw = pcieBandwidthGBps(gen, width);
    if (bw !== undefined) {
      out.linkGBps = Math.round(bw * 10) / 10;
      how.push(`link: PCIe gen ${gen} x${width} per direction after line encoding`);
    }
  }
  if (d.memoryBusWidthBits && d.memoryClockKHz) {
    out.memoryGBps = Math.round(((d.memoryBusWidthBits / 8) * d.memoryClockKHz * 1e3 * 2) / 1e9);
    how.push(`memory: ${d.memoryBusWidthBits}-bit bus x ${d.memoryClockKHz / 1000} MHz x 2 (double data rate)`);
  }
  out.how = how.join('; ') || 'unknown: the runtime reports no link or memory bus facts';
  return out;
}

/** Percent of peak and a plain reason for low headline figures. */
function annotate(results: BenchResult[], d: DeviceInfo, peaks: { linkGBps?: number; memoryGBps?: number }): void {
  // The headline of a series (same test, direction, kinds, engine, peer) is its largest size.
  const series = (r: BenchResult): string => `${r.test}|${r.direction}|${r.srcKind}|${r.dstKind}|${r.engine}|${r.peer ?? ''}|${r.peerAccess ?? ''}`;
  const largest = new Map<string, number>();
  for (const r of results) largest.set(series(r), Math.max(largest.get(series(r)) ?? 0, r.bytes));
  const linkBelowMax =
    d.link && ((d.link.generation ?? 0) < (d.link.maxGeneration ?? 0) || (d.link.width ?? 0) < (d.link.maxWidth ?? 0))
      ? `PCIe link trained at gen ${d.link.generation} x${d.link.width}, below its maximum gen ${d.link.maxGeneration} x${d.link.maxWidth}`
      : undefined;
  for (const r of results) {
    if (r.medianGBps === undefined) continue;
    const overLink = (r.test === 'copy' && r.direction !== 'DtoD') || r.test === 'zero-copy' || (r.test === 'sm-copy' && r.direction !== 'DtoD');
    const overMemory = r.test === 'stream' || (r.test === 'copy' && r.direction === 'DtoD') || (r.test === 'sm-copy' && r.direction === 'DtoD');
    const peak = overLink ? (r.direction === 'bidirectional' ? (peaks.linkGBps ?? 0) * 2 : peaks.linkGBps) : overMemory ? peaks.memoryGBps : undefined;
    if (!peak) continue;
    if (r.test === 'cache' || r.bytes !== largest.get(series(r))) continue;
    r.percentOfPeak = Math.round((r.medianGBps / peak) * 1000) / 10;
    if (r.percentOfPeak >= 80) continue;
    const reasons: string[] = [];
    if (overLink && linkBelowMax) reasons.push(linkBelowMax);
    if (r.srcKind === 'pageable' || r.dstKind === 'pageable')
      reasons.push('pageable memory: the driver copies through a pinned bounce buffer (pin staging buffers)');
    else if (r.test === 'zero-copy' || r.srcKind === 'mapped' || r.dstKind === 'mapped')
      reasons.push('zero-copy accesses cross the link in small transactions, each a round trip');
    else if (r.engine === 'sm' && overLink) reasons.push('a kernel reading host memory issues loads across the link; the copy engines move large blocks');
    else if (overLink) reasons.push('below 80% of the link: other traffic, an IOMMU, a PCIe switch, or remote NUMA memory');
    else reasons.push('below 80% of the theoretical memory bandwidth (refresh, clocks and access pattern keep every GPU under it)');
    r.note = reasons.join('; ');
  }
}

/** The smallest --max-size: the access patterns and the cache sweep need a working set of 16 KiB and more. */
export const MIN_MAX_BYTES = 64 * 1024;

/**
 * Runs one test group; a failure other than an interrupt or a sticky device error is reported as a failure of that
 * group (never as a figure) and the bench goes on.
 */
async function guarded(ctx: BenchContext, name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof BenchAborted || (e instanceof GpuError && e.code === ErrorCode.DEVICE_UNUSABLE)) throw e;
    ctx.failures.push({ test: name, direction: 'all', bytes: 0, reason: `the test failed: ${(e as Error).message}` });
    ctx.progress(`${name}: FAILED: ${(e as Error).message}`);
  }
}

/**
 * Runs the bench on `rt`. When `options.signal` aborts, the test under way stops, everything is freed, and the report
 * holds the rows finished before it with `environment.interrupted` set.
 * @throws InvalidArgumentError for an unknown device or test, or an impossible request (peer with one device).
 */
export async function runBench(rt: Runtime, options: BenchOptions): Promise<BenchReport> {
  const t0 = performance.now();
  const devices = options.devices ?? rt.devices.map((d) => d.index);
  if (devices.length === 0) throw new InvalidArgumentError(`no device to measure: ${rt.backend.noDeviceReason() ?? 'the backend has none'}`);
  for (const d of devices) rt.device(d);
  const only = new Set<string>(options.only ?? BENCH_TESTS);
  for (const t of only)
    if (!(BENCH_TESTS as readonly string[]).includes(t)) throw new InvalidArgumentError(`unknown test "${t}" (tests: ${BENCH_TESTS.join(', ')})`);
  for (const [test, what] of [
    ['peer', 'peer copies'],
    ['collectives', 'collectives'],
  ] as const)
    if (options.only?.includes(test) && devices.length < 2)
      throw new InvalidArgumentError(`${what} need two devices; ${devices.length === 1 ? 'only one is' : 'none is'} selected`, ErrorCode.UNSUPPORTED);
  const host = rt.backend.name === 'host';
  const defaultMax = host ? (options.quick ? 16 * MiB : 64 * MiB) : options.quick ? 256 * MiB : GiB;
  const max = options.maxBytes ?? defaultMax;
  if (!Number.isSafeInteger(max) || max < MIN_MAX_BYTES)
    throw new InvalidArgumentError(
      `--max-size must be at least 64 KiB (${MIN_MAX_BYTES} bytes), the smallest working set every test runs with; got ${max} bytes`,
      ErrorCode.INVALID_SIZE,
    );
  for (const d of devices) {
    const free = rt.device(d).memGetInfo().freeBytes;
    if (max * 3 > free)
      throw new InvalidArgumentError(`--max-size ${max} needs about ${3 * max} bytes of device ${d} memory; ${free} are free`, ErrorCode.INVALID_SIZE);
  }

  const ctxs: BenchContext[] = [];
  const results: BenchResult[] = [];
  const failures: BenchEnvironment['failures'] = [];
  const envDevices: BenchEnvironment['devices'] = [];
  let interrupted = false;
  try {
    try {
      for (const d of devices) ctxs.push(new BenchContext(rt, d, options));
      for (const ctx of ctxs) {
        const info = ctx.dev.info();
        const peaks = theoreticalPeaks(info);
        envDevices.push({
          index: info.index,
          name: info.name,
          arch: info.arch,
          totalBytes: info.totalBytes,
          multiprocessors: info.multiprocessors,
          l2Bytes: info.l2Bytes,
          pciBusId: info.pciBusId,
          link: info.link,
          numaNode: info.numaNode,
          concurrentManagedAccess: info.concurrentManagedAccess,
          pageableMemoryAccess: info.pageableMemoryAccess,
          xnack: info.xnack,
          peaks,
        });
        const kernels = !!ctx.module;
        const groups: Array<[string, boolean, () => Promise<void>]> = [
          ['copy', only.has('copy') || only.has('sm-copy'), () => copyTests(ctx, max)],
          ['managed', only.has('managed') && kernels, () => managedTests(ctx, max)],
          ['zero-copy', only.has('zero-copy') && kernels, () => zeroCopyTests(ctx, max)],
          ['stream', only.has('stream') && kernels, () => streamTests(ctx, max)],
          ['cache', only.has('cache') && kernels, () => cacheSweep(ctx, max)],
          ['access', only.has('access') && kernels, () => accessTests(ctx, max)],
          ['latency', only.has('latency') && kernels, () => latencyTests(ctx, max)],
          ['alloc', only.has('alloc'), () => allocTests(ctx)],
          ['transfer', only.has('transfer'), () => transferTests(ctx, max)],
          ['safetensors', only.has('transfer'), () => safetensorsTests(ctx, max)],
        ];
        for (const [name, wanted, fn] of groups) if (wanted) await guarded(ctx, name, fn);
      }
      if (only.has('peer')) await guarded(ctxs[0]!, 'peer', () => peerTests(rt, ctxs, max));
      if (only.has('collectives')) await guarded(ctxs[0]!, 'collective', () => collectiveTests(rt, ctxs, max));
    } catch (e) {
      // Ctrl-C: the rows finished so far are kept and reported as an interrupted run
      if (!(e instanceof BenchAborted)) throw e;
      interrupted = true;
    }
    for (const ctx of ctxs) {
      let rows = ctx.results;
      if (!only.has('copy')) rows = rows.filter((r) => r.test !== 'copy');
      if (!only.has('sm-copy')) rows = rows.filter((r) => r.test !== 'sm-copy');
      const env = envDevices.find((e) => e.index === ctx.dev.index)!;
      annotate(rows, ctx.dev.info(), env.peaks);
      results.push(...rows);
      failures.push(...ctx.failures);
    }
  } finally {
    for (const c of ctxs) c[Symbol.dispose]();
  }
  const environment: BenchEnvironment = {
    backend: rt.backend.name,
    gpumemVersion: packageVersion(),
    node: process.version,
    host: hostname(),
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    date: new Date().toISOString(),
    mode: options.quick ? 'quick' : 'full',
    timing: options.gated ? 'gated' : 'as-native',
    devices: envDevices,
    hostNumaNodes: numaNodes(),
    failures,
    seconds: Math.round((performance.now() - t0) / 100) / 10,
  };
  if (interrupted) environment.interrupted = true;
  if (rt.backend.runtimeVersion) environment.runtimeVersion = rt.backend.runtimeVersion;
  if (rt.backend.driverVersion) environment.driverVersion = rt.backend.driverVersion;
  return { schema: 'gpumem.bench/1', environment, results };
}
