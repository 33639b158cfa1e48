/**
 * The monitor over HTTP: the dashboard page at /, the latest sample and the history as JSON at /api/sample and
 * /api/history, and Prometheus' text format at /metrics (a fresh sample per scrape). A timer samples every
 * interval for the history; a scrape reads the present without adding to it. Only GET and HEAD are answered, and a
 * request naming another host is refused (net/host-check.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ErrorCode, InvalidArgumentError } from '../errors.js';
import { guarded, HostPolicy } from '../net/host-check.js';
import { checkPort, closeServer, listenOn } from '../net/listen.js';
import { dashboardPage } from '../render/monitor-dashboard.js';
import type { MemoryMonitor } from './monitor.js';
import { PROMETHEUS_CONTENT_TYPE, toPrometheus } from './prometheus.js';

export interface MonitorServerOptions {
  /** TCP port; 0 picks a free one (default 9464). */
  port?: number;
  /** Address to listen on (default 127.0.0.1; 0.0.0.0 for a cluster's Prometheus to reach it). */
  host?: string;
  /** Sampling interval for the history and the page's polling, in milliseconds (default 1000). */
  intervalMs?: number;
  /** Host names to answer besides the loopback ones (default: GPUMEM_ALLOWED_HOSTS); bound beyond loopback, the only ones. */
  allowedHosts?: readonly string[] | undefined;
}

export class MonitorServer implements AsyncDisposable {
  private readonly server: Server;
  private timer: NodeJS.Timeout | undefined;
  private page: string | undefined;
  private closed = false;
  readonly intervalMs: number;

  constructor(
    readonly monitor: MemoryMonitor,
    private readonly options: MonitorServerOptions = {},
  ) {
    const interval = options.intervalMs ?? 1000;
    if (typeof interval !== 'number' || !Number.isFinite(interval) || interval < 100 || interval > 3_600_000) {
      throw new InvalidArgumentError(`the sampling interval must be from 100 ms to 1 hour, got ${String(interval)} ms`, ErrorCode.INVALID_ARGUMENT);
    }
    checkPort(options.port ?? 9464);
    this.intervalMs = interval;
    const policy = new HostPolicy(options.host ?? '127.0.0.1', options.allowedHosts);
    this.server = createServer(guarded(policy, (req, res) => this.handle(req, res)));
  }

  /**
   * Starts listening and sampling.
   * @throws GpuError (LISTEN_FAILED) when the address is taken or cannot be used, naming it.
   */
  async listen(): Promise<{ url: string; port: number }> {
    const address = await listenOn(this.server, this.options.host ?? '127.0.0.1', this.options.port ?? 9464);
    this.monitor.sample();
    this.timer = setInterval(() => {
      try {
        this.monitor.sample();
      } catch {
        // a failed sample leaves a gap in the history; /api/sample and /metrics report the error when asked
      }
    }, this.intervalMs);
    return address;
  }

  private send(res: ServerResponse, status: number, type: string, body: string, head: boolean): void {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
    res.end(head ? undefined : body);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const head = req.method === 'HEAD';
    if (req.method !== 'GET' && !head) {
      res.setHeader('allow', 'GET, HEAD');
      this.send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false);
      return;
    }
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    try {
      switch (path) {
        case '/':
          this.page ??= dashboardPage(this.intervalMs);
          this.send(res, 200, 'text/html; charset=utf-8', this.page, head);
          return;
        case '/metrics':
          this.send(res, 200, PROMETHEUS_CONTENT_TYPE, toPrometheus(this.monitor.peek()), head);
          return;
        case '/api/sample':
          this.send(res, 200, 'application/json', JSON.stringify(this.monitor.latest ?? this.monitor.peek()), head);
          return;
        case '/api/history':
          this.send(res, 200, 'application/json', JSON.stringify(this.monitor.history), head);
          return;
        default:
          this.send(res, 404, 'text/plain; charset=utf-8', `not found: ${path} (try /, /metrics, /api/sample, /api/history)\n`, head);
      }
    } catch (e) {
      this.send(res, 500, 'text/plain; charset=utf-8', `sampling failed: ${(e as Error).message}\n`, head);
    }
  }

  /** Stops sampling and closes the server (open connections included). A second call does nothing. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await closeServer(this.server);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
