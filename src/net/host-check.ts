/**
 * What every gpumem server does before it answers: it refuses a request whose `Host` header names a server it is
 * not (a page on another origin that rebinds its own name to 127.0.0.1 sends its own name), and marks every answer
 * `X-Content-Type-Options: nosniff`. A server bound to loopback answers only to localhost, 127.0.0.1 and [::1] with
 * its port; one bound elsewhere answers any name unless an allow-list is given. The list comes from the server's
 * options or from GPUMEM_ALLOWED_HOSTS (comma-separated names, each with or without a port).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { InvalidArgumentError } from '../errors.js';

/** The environment variable that adds names a server answers to (a reverse proxy's, a cluster node's). */
export const ALLOWED_HOSTS_ENV = 'GPUMEM_ALLOWED_HOSTS';

/** True when `host` (an address or name to listen on) reaches only this machine. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(h);
}

/** One allowed name: a host name or address in lower case, and a port, or undefined for any port. */
interface AllowedHost {
  name: string;
  port: number | undefined;
}

/**
 * Parses names like `gpu-node-3`, `gpu-node-3:9464`, `10.0.0.5`, `[fd00::1]:9464`.
 * @throws InvalidArgumentError for an entry that is not a host name or address with an optional port.
 */
export function parseAllowedHosts(list: readonly string[] | string): AllowedHost[] {
  const items = typeof list === 'string' ? list.split(',') : list;
  const out: AllowedHost[] = [];
  for (const raw of items) {
    const item = raw.trim();
    if (item === '') continue;
    const parsed = splitHost(item);
    if (!parsed || !/^[a-z0-9.:_-]+$/.test(parsed.name))
      throw new InvalidArgumentError(`allowed host ${JSON.stringify(item.slice(0, 100))} is not a host name or address with an optional :port`);
    out.push(parsed);
  }
  return out;
}

/** A Host header's name and port: `name`, `name:port`, `[v6]`, `[v6]:port`; undefined when malformed. */
function splitHost(value: string): AllowedHost | undefined {
  const v = value.toLowerCase();
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(v);
  if (!m) return undefined;
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && port > 65535) return undefined;
  return { name: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/** The names a loopback server answers to. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

/** Decides whether a request's Host header names this server. */
export class HostPolicy {
  /** Names given (any port where none is given). */
  private readonly extra: AllowedHost[];
  /** Loopback names and the bound address: with the server's own port only. */
  private readonly own: string[];
  /** True when any name is accepted: bound beyond loopback with no allow-list. */
  readonly open: boolean;

  /**
   * @param bindHost the address the server listens on.
   * @param allowedHosts names to accept besides the loopback ones (default: GPUMEM_ALLOWED_HOSTS).
   * @throws InvalidArgumentError for a malformed entry.
   */
  constructor(bindHost: string, allowedHosts?: readonly string[]) {
    this.extra = parseAllowedHosts(allowedHosts ?? process.env[ALLOWED_HOSTS_ENV] ?? []);
    this.open = !isLoopback(bindHost) && this.extra.length === 0;
    const bound = bindHost.toLowerCase().replace(/^\[|\]$/g, '');
    // A wildcard address is no name of the server (and browsers send 0.0.0.0 to this machine: never accept it).
    this.own = bound === '0.0.0.0' || bound === '::' ? LOOPBACK_NAMES : [...new Set([...LOOPBACK_NAMES, bound])];
  }

  /**
   * True when `host` (the Host header) names this server listening on `port`. A loopback name must carry the port
   * (a browser always sends it for a port other than 80); a name given without a port matches any.
   */
  allows(host: string | undefined, port: number): boolean {
    if (this.open) return true;
    if (host === undefined) return false;
    const h = splitHost(host);
    if (!h) return false;
    const got = h.port ?? 80;
    if (got === port && this.own.includes(h.name)) return true;
    return this.extra.some((a) => a.name === h.name && (a.port === undefined || a.port === got));
  }
}

/**
 * Wraps a request handler: every answer carries `X-Content-Type-Options: nosniff`, and a request for a host this
 * server is not gets 403 with a line saying what to do.
 */
export function guarded(policy: HostPolicy, handler: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    res.setHeader('x-content-type-options', 'nosniff');
    const port = req.socket.localPort ?? 0;
    if (!policy.allows(req.headers.host, port)) {
      const body = `refused: this server answers only to the names it was given (Host ${JSON.stringify(String(req.headers.host ?? '').slice(0, 100))}); add a name with ${ALLOWED_HOSTS_ENV}\n`;
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    handler(req, res);
  };
}
