/**
 * `gpumem monitor`: live memory per device and process. The terminal view redraws every interval; `--json` prints
 * one sample per line; `--prometheus` prints the exposition format; `--serve` runs the web dashboard and the
 * Prometheus endpoint until Ctrl-C.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryMonitor } from '../monitor/monitor.js';
import { toPrometheus } from '../monitor/prometheus.js';
import { MonitorServer } from '../monitor/server.js';
import { renderFrame } from '../monitor/terminal.js';
import { withRuntime, type Io } from './commands.js';

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
  port: number;
  host: string;
}

/** Aborts on SIGINT or SIGTERM; `release()` removes the listeners. */
function interruption(): { signal: AbortSignal; done: Promise<void>; release: () => void } {
  const ac = new AbortController();
  const finish = (): void => ac.abort();
  process.once('SIGINT', finish);
  process.once('SIGTERM', finish);
  const done = new Promise<void>((resolve) => ac.signal.addEventListener('abort', () => resolve(), { once: true }));
  return {
    signal: ac.signal,
    done,
    release: () => {
      process.removeListener('SIGINT', finish);
      process.removeListener('SIGTERM', finish);
    },
  };
}

export async function runMonitor(opts: MonitorCliOptions, io: Io, interactive = process.stdout.isTTY === true): Promise<void> {
  await withRuntime(opts, io, async (rt) => {
    const monitor = new MemoryMonitor(rt, { devices: opts.device });
    const intervalMs = opts.interval * 1000;
    if (opts.serve) {
      await using server = new MonitorServer(monitor, { port: opts.port, host: opts.host, intervalMs });
      const stop = interruption();
      try {
        const { url } = await server.listen();
        io.out(`gpumem monitor: dashboard ${url}  metrics ${url}metrics  (Ctrl-C to stop)\n`);
        await stop.done;
      } finally {
        stop.release();
      }
      return;
    }
    const limit = opts.once ? 1 : opts.count;
    const redraw = interactive && !opts.json && !opts.prometheus && limit !== 1;
    const stop = interruption();
    try {
      for (let n = 0; (limit === undefined || n < limit) && !stop.signal.aborted; n++) {
        const s = monitor.sample();
        if (opts.json) io.out(`${JSON.stringify(s)}\n`);
        else if (opts.prometheus) io.out(toPrometheus(s));
        else io.out(`${redraw ? '\x1b[H\x1b[2J' : n > 0 ? '\n' : ''}${renderFrame(s, { interactive: redraw })}`);
        if (limit !== undefined && n + 1 >= limit) break;
        await sleep(intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    } finally {
      stop.release();
    }
  });
}
