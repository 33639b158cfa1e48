/** Listening and closing for gpumem's HTTP servers (the monitor's dashboard, the plan page). */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';

/** Checks a TCP port (0: any free one). @throws InvalidArgumentError */
export function checkPort(port: number): void {
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InvalidArgumentError(`port must be a whole number from 0 to 65535, got ${String(port)}`, ErrorCode.INVALID_ARGUMENT);
}

/**
 * Starts `server` listening on host:port and returns its URL.
 * @throws GpuError (LISTEN_FAILED) when the address is taken or cannot be used, naming it.
 */
export async function listenOn(server: Server, host: string, port: number): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      reject(
        new GpuError(ErrorCode.LISTEN_FAILED, `cannot listen on ${host}:${port}: ${e.code === 'EADDRINUSE' ? 'the port is in use' : e.message}`, { cause: e }),
      );
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const a = server.address() as AddressInfo;
  const shown = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return { url: `http://${shown}:${a.port}/`, port: a.port };
}

/** Closes `server` and its open connections; resolves at once when it is not listening. */
export async function closeServer(server: Server): Promise<void> {
  if (!server.listening) return;
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
