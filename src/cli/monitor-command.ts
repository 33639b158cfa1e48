/**
 * `gpumem monitor`: live memory per device and process. The terminal view redraws every interval; `--json` prints
 * one sample per line; `--prometheus` prints the exposition format; `--serve` runs the web dashboard and the
 * Prometheus endpoint until Ctrl-C.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Option, type Command } from 'commander';
import { closeSync, openSync, writeSync } from 'node:fs';
import { checkWritable, interruption, withRuntime, type Io } from './context.js';
import { outputWidth } from '../render/width.js';
import { UsageError } from './errors.js';
import { backendOption, collectInts, parsePercent, parsePort, parsePositive, parseSeconds } from './options.js';

export interface MonitorCliOptions {
  backend?: string;
  device?: number[];
  /** Seconds between samples. */
  interval: number;
  once?: boolean;
  count?: number;
  json?: boolean;
  prometheus?: boolean;
  serve?: boolean;
  csv?: boolean;
  log?: string;
  port: number;
  host: string;
  allowHost?: string[];
  warn: number;
  critical: number;
  warnTime: number;
  criticalTime: number;
  forecastWindow: number;
}

export function defineMonitor(program: Command, io: Io): void {
  program
    .command('monitor')
    .description('live memory per device and per process: a terminal view, JSON lines, Prometheus text, or a web dashboard with a Prometheus endpoint')
    .addOption(backendOption())
    .option('--device <n...>', 'devices to watch (default: all)', collectInts('--device', { distinct: true }), undefined)
    .option('--interval <seconds>', 'seconds between samples, 0.1 to 3600', (v) => parseSeconds(v, '--interval'), 1)
    .option('--once', 'print one sample and exit')
    .option('--count <n>', 'stop after n samples', (v) => parsePositive(v, '--count'))
    .option('--json', 'one JSON sample per line (schema gpumem.monitor/1)')
    .option('--prometheus', "print samples in Prometheus' text format (e.g. for node_exporter's textfile collector)")
    .option('--csv', 'one CSV row per device per sample, with a header (e.g. --once --csv)')
    .option('--log <file>', 'append every sample to FILE as one JSON line (NDJSON history, schema gpumem.monitor/1)')
    .addOption(
      new Option('--warn <percent>', 'mark a device warning from this percentage of its memory in use')
        .argParser((v) => parsePercent(v, '--warn'))
        .default(0.9, '90'),
    )
    .addOption(
      new Option('--critical <percent>', 'mark a device critical from this percentage in use')
        .argParser((v) => parsePercent(v, '--critical'))
        .default(0.97, '97'),
    )
    .option('--warn-time <seconds>', 'mark warning when memory at its current growth runs out within this time', (v) => parseSeconds(v, '--warn-time'), 900)
    .option('--critical-time <seconds>', 'mark critical when it runs out within this time', (v) => parseSeconds(v, '--critical-time'), 120)
    .option(
      '--forecast-window <seconds>',
      'fit the growth of used memory over the samples of this last window',
      (v) => parseSeconds(v, '--forecast-window'),
      300,
    )
    .option('--serve', 'serve the web dashboard at / and Prometheus metrics at /metrics until Ctrl-C')
    .option('--port <n>', 'port for --serve (0 picks a free one)', (v) => parsePort(v), 9464)
    .option('--host <address>', 'address for --serve to listen on (0.0.0.0 to let other machines scrape it)', '127.0.0.1')
    .option(
      '--allow-host <name...>',
      'host names --serve answers to besides localhost (name or name:port; default GPUMEM_ALLOWED_HOSTS); on an address beyond loopback, the only ones',
    )
    .addHelpText(
      'after',
      `
Examples:
  $ gpumem monitor                      redraws every second until Ctrl-C
  $ gpumem monitor --once --json
  $ gpumem monitor --serve --host 0.0.0.0 --port 9464     dashboard at http://HOST:9464/, scrape /metrics
  $ gpumem monitor --once --csv
  $ gpumem monitor --interval 10 --log memory.ndjson      the history on disk, one sample per line

Bound to loopback (the default), --serve answers only requests for localhost, 127.0.0.1 or [::1] with its port,
so a page on another site cannot read it through a name rebound to 127.0.0.1; --allow-host adds names.

Every sample forecasts the time to out-of-memory from the growth of used memory over the forecast window and marks
each device and pool ok, warning or critical (--warn, --critical, --warn-time, --critical-time). For a fleet, run
--serve on each node and let one Prometheus scrape them: every series carries hostname, uuid and vendor; the
Grafana dashboard is deploy/grafana/gpumem-dashboard.json.

The figures and the per-process list come from NVML on NVIDIA and ROCm SMI on AMD (no context is created on the
GPUs); without those libraries from the runtime's memGetInfo, without a process list. Bytes are bytes; the terminal
view prints GiB = 2^30.`,
    )
    .action((opts: MonitorCliOptions) => {
      if ([opts.json, opts.prometheus, opts.serve, opts.csv].filter(Boolean).length > 1)
        throw new UsageError('choose one of --json, --prometheus, --csv and --serve');
      const pct = (f: number): string => `${+(f * 100).toFixed(2)}%`;
      if (opts.warn === 0) throw new UsageError('--warn must be above 0%');
      if (opts.warn > opts.critical)
        throw new UsageError(`--warn ${pct(opts.warn)} is above --critical ${pct(opts.critical)}: a device must warn before it is critical`);
      if (opts.warnTime < opts.criticalTime)
        throw new UsageError(`--warn-time ${opts.warnTime} s is below --critical-time ${opts.criticalTime} s: the warning must come before the critical state`);
      checkWritable(opts.log, '--log');
      return runMonitor(opts, io);
    });
}

/** Resolves once `monitor` has taken `count` samples since its count was `from` (checked every quarter interval), or on abort. */
async function untilSamples(monitor: { sampleCount: number }, from: number, count: number, intervalMs: number, signal: AbortSignal): Promise<void> {
  while (!signal.aborted && monitor.sampleCount - from < count) await sleep(Math.max(25, intervalMs / 4), undefined, { signal }).catch(() => undefined);
}

export async function runMonitor(opts: MonitorCliOptions, io: Io, interactive = process.stdout.isTTY === true): Promise<void> {
  const { MemoryMonitor } = await import('../monitor/monitor.js');
  const { toPrometheus } = await import('../monitor/prometheus.js');
  const { MonitorServer } = await import('../monitor/server.js');
  const { renderFrame } = await import('../render/monitor-terminal.js');
  const { toCsv } = await import('../monitor/csv.js');
  await withRuntime(opts, io, async (rt) => {
    const log = opts.log ? openSync(opts.log, 'a') : undefined;
    const monitor = new MemoryMonitor(rt, {
      devices: opts.device,
      thresholds: {
        warningFraction: opts.warn,
        criticalFraction: opts.critical,
        warningSeconds: opts.warnTime,
        criticalSeconds: opts.criticalTime,
        windowSeconds: opts.forecastWindow,
      },
      onSample: log === undefined ? undefined : (s) => writeSync(log, `${JSON.stringify(s)}\n`),
    });
    try {
      await watch(monitor);
    } finally {
      if (log !== undefined) closeSync(log);
    }
  });

  async function watch(monitor: InstanceType<typeof MemoryMonitor>): Promise<void> {
    const intervalMs = opts.interval * 1000;
    const limit = opts.once ? 1 : opts.count;
    if (opts.serve) {
      await using server = new MonitorServer(monitor, { port: opts.port, host: opts.host, intervalMs, allowedHosts: opts.allowHost });
      const stop = interruption();
      try {
        const before = monitor.sampleCount;
        const { url } = await server.listen();
        io.out(`gpumem monitor: dashboard ${url}  metrics ${url}metrics  (${limit === undefined ? 'Ctrl-C to stop' : `stops after ${limit} sample(s)`})\n`);
        // --count / --once: serve until that many samples were taken (the first at start, then one per interval).
        const counted = limit === undefined ? stop.done : untilSamples(monitor, before, limit, intervalMs, stop.signal);
        await Promise.race([stop.done, counted]);
      } finally {
        stop.release();
      }
      return;
    }
    const redraw = interactive && !opts.json && !opts.prometheus && !opts.csv && limit !== 1;
    const stop = interruption();
    const stopKey = redraw ? quitOnKey(stop.abort) : undefined;
    try {
      for (let n = 0; (limit === undefined || n < limit) && !stop.signal.aborted; n++) {
        const s = monitor.sample();
        if (opts.json) io.out(`${JSON.stringify(s)}\n`);
        else if (opts.prometheus) io.out(toPrometheus(s));
        else if (opts.csv) io.out(toCsv(s, n === 0));
        else {
          if (redraw) (io.control ?? io.out)('\x1b[H\x1b[2J');
          io.out(`${!redraw && n > 0 ? '\n' : ''}${renderFrame(s, { interactive: redraw, width: outputWidth() })}`);
        }
        if (limit !== undefined && n + 1 >= limit) break;
        await sleep(intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    } finally {
      stopKey?.();
      stop.release();
    }
  }
}

/**
 * In the interactive view, q (or Q, or Ctrl-C, which raw mode delivers as a key) stops the monitor as SIGINT does.
 * Returns the function that gives the terminal back as it was.
 */
function quitOnKey(abort: () => void): (() => void) | undefined {
  const input = process.stdin;
  if (!input.isTTY || typeof input.setRawMode !== 'function') return undefined;
  const onData = (b: Buffer): void => {
    if (b.includes(0x71) || b.includes(0x51) || b.includes(0x03)) abort();
  };
  input.setRawMode(true);
  input.on('data', onData);
  input.resume();
  return () => {
    input.off('data', onData);
    input.setRawMode(false);
    input.pause();
  };
}
