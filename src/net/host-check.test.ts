/** The page server probed over real HTTP with the Host headers a rebinding page, a proxy and a browser send. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../errors.js';
import { probe } from '../testing/http-probe.js';
import { HostPolicy, isLoopback } from './host-check.js';
import { servePage } from './page-server.js';

test('bound to loopback, the page answers only localhost, 127.0.0.1 and [::1] with its port, and never lets a type be sniffed', async () => {
  await using server = await servePage('<p>plan</p>', { allowedHosts: [] });
  const port = Number(new URL(server.url).port);
  for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
    const r = await probe(port, '/', host);
    assert.equal(r.status, 200, host);
    assert.equal(r.headers['x-content-type-options'], 'nosniff', host);
    assert.equal(r.body, '<p>plan</p>');
  }
  for (const host of ['evil.example', `evil.example:${port}`, `localhost:${port + 1}`, 'localhost', `127.0.0.1.evil.example:${port}`, `0.0.0.0:${port}`]) {
    const r = await probe(port, '/', host);
    assert.equal(r.status, 403, String(host));
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
    assert.doesNotMatch(r.body, /plan/, 'the page is not in the refusal');
  }
  assert.equal((await probe(port, '/', null)).status, 400, "no Host header at all: Node's server refuses it before gpumem sees it");
  // Refusals and errors are marked too.
  const missing = await probe(port, '/nowhere', `localhost:${port}`);
  assert.equal(missing.status, 404);
  assert.equal(missing.headers['x-content-type-options'], 'nosniff');
});

test('an allow-list adds names; bound beyond loopback it is the only list', async () => {
  await using server = await servePage('<p>plan</p>', { allowedHosts: ['gpu-node-3', 'proxy.lan:8443'] });
  const port = Number(new URL(server.url).port);
  assert.equal((await probe(port, '/', 'gpu-node-3')).status, 200, 'a name without a port matches any port');
  assert.equal((await probe(port, '/', 'gpu-node-3:1234')).status, 200);
  assert.equal((await probe(port, '/', 'proxy.lan:8443')).status, 200);
  assert.equal((await probe(port, '/', 'proxy.lan:8444')).status, 403);
  assert.equal((await probe(port, '/', `localhost:${port}`)).status, 200);
  const wide = new HostPolicy('0.0.0.0', ['gpu-node-3']);
  assert.equal(wide.allows('gpu-node-3:9464', 9464), true);
  assert.equal(wide.allows('evil.example:9464', 9464), false);
  assert.equal(wide.allows('0.0.0.0:9464', 9464), false, '0.0.0.0 reaches this machine from a browser: never a name of it');
  assert.equal(new HostPolicy('0.0.0.0', []).open, true, 'bound beyond loopback without a list: any name (a cluster Prometheus)');
  assert.equal(new HostPolicy('127.0.0.1', []).open, false);
  assert.throws(() => new HostPolicy('127.0.0.1', ['bad host/']), InvalidArgumentError);
  assert.ok(isLoopback('127.0.0.2') && isLoopback('[::1]') && isLoopback('localhost') && !isLoopback('0.0.0.0') && !isLoopback('10.0.0.1'));
});

test('GPUMEM_ALLOWED_HOSTS gives the list when the options do not', async () => {
  const before = process.env.GPUMEM_ALLOWED_HOSTS;
  process.env.GPUMEM_ALLOWED_HOSTS = 'dash.example, other.example:9000';
  try {
    await using server = await servePage('<p>plan</p>');
    const port = Number(new URL(server.url).port);
    assert.equal((await probe(port, '/', 'dash.example')).status, 200);
    assert.equal((await probe(port, '/', 'other.example:9000')).status, 200);
    assert.equal((await probe(port, '/', 'evil.example')).status, 403);
  } finally {
    if (before === undefined) delete process.env.GPUMEM_ALLOWED_HOSTS;
    else process.env.GPUMEM_ALLOWED_HOSTS = before;
  }
});
