/**
 * One HTML page over HTTP (the interactive plan page): GET and HEAD of / answer it, anything else 404 or 405; a
 * request naming another host is refused (host-check.ts).
 */
import { createServer } from 'node:http';
import { guarded, HostPolicy } from './host-check.js';
import { checkPort, closeServer, listenOn } from './listen.js';

export interface PageServer extends AsyncDisposable {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `html` at / on host:port (default 127.0.0.1, port 0: a free one). `allowedHosts`: names to answer besides
 * the loopback ones (default GPUMEM_ALLOWED_HOSTS).
 * @throws GpuError (LISTEN_FAILED) when the address cannot be used; InvalidArgumentError for a bad port or allowed host.
 */
export async function servePage(
  html: string,
  options: { host?: string | undefined; port?: number | undefined; allowedHosts?: readonly string[] | undefined } = {},
): Promise<PageServer> {
  const port = options.port ?? 0;
  checkPort(port);
  const host = options.host ?? '127.0.0.1';
  const policy = new HostPolicy(host, options.allowedHosts);
  const body = Buffer.from(html);
  const server = createServer(
    guarded(policy, (req, res) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path !== '/' && path !== '/index.html') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': body.length, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    }),
  );
  const { url } = await listenOn(server, host, port);
  const close = (): Promise<void> => closeServer(server);
  return { url, close, [Symbol.asyncDispose]: close };
}
