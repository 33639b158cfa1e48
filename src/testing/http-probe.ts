/** A raw HTTP request with any Host header (fetch forbids setting it), for probing the servers as a rebinding page would. */
import { request } from 'node:http';

export interface Probed {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Sends `method path` to 127.0.0.1:port with the Host header given (none when `host` is null). */
export function probe(port: number, path: string, host: string | null, method = 'GET'): Promise<Probed> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, setHost: host !== null, headers: host === null ? {} : { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
