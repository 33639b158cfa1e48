/** What tests share: running the CLI in-process, opening a generated HTML page in a real headless Chromium, counting open descriptors. */
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { main } from '../cli/program.js';
import type { Runtime } from '../runtime/runtime.js';

/** Runs `gpumem ARGS` in this process and collects its exit code, stdout and stderr. */
export async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (s) => out.push(s), err: (s) => err.push(s) });
  return { code, out: out.join(''), err: err.join('') };
}

/** Debian's chromium, when installed (.ci/run installs it). */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/**
 * Opens an HTML file (or an http:// URL) in headless Chromium, runs `script` (an expression, as text so tests need
 * no DOM types; a promise is awaited) in the page and returns its value with the page's errors.
 */
export async function inChromium<T>(file: string, script: string): Promise<{ value: T; errors: string[] }> {
  return withChromiumPage(file, async (page) => (await page.evaluate(script)) as T);
}

/** Opens an HTML file (or an http:// URL) in headless Chromium and hands the page to `fn`, with the page's errors. */
export async function withChromiumPage<T>(file: string, fn: (page: import('playwright-core').Page) => Promise<T>): Promise<{ value: T; errors: string[] }> {
  if (!CHROMIUM) throw new Error('chromium is not installed');
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  try {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(/^https?:\/\//.test(file) ? file : `file://${file}`);
    return { value: await fn(page), errors };
  } finally {
    await browser.close();
  }
}

/**
 * Calls `register(name, open)` for each GPU backend (cuda, hip) that has a device here, and registers a skipped test
 * naming the reason for each that has none: how the conformance suites reach every backend with a device.
 */
export async function forEachGpuBackend(suite: string, register: (name: 'cuda' | 'hip', open: () => Runtime) => void): Promise<void> {
  const { openRuntime } = await import('../runtime/runtime.js');
  const { test } = await import('node:test');
  const { default: assert } = await import('node:assert/strict');
  const { systemSeesGpu } = await import('../backend/system-devices.js');
  for (const name of ['cuda', 'hip'] as const) {
    let devices = 0;
    let why = '';
    try {
      using rt = openRuntime({ backend: name });
      devices = rt.devices.length;
      why = rt.backend.noDeviceReason() ?? '';
    } catch (e) {
      why = (e as Error).message.split('\n')[0]!;
    }
    const seen = devices > 0 ? undefined : systemSeesGpu(name);
    if (devices > 0) register(name, () => openRuntime({ backend: name }));
    // A GPU the system sees but the backend cannot open fails: a broken install must not pass as "no GPU here".
    else if (seen) test(`${name}: ${suite}`, () => assert.fail(`${seen}, but the ${name} backend cannot open it: ${why}`));
    else test(`${name}: ${suite}`, { skip: `no ${name} device here (${why})` }, () => {});
  }
}

/**
 * Descriptors this process holds open (Linux). With `under`, only those naming a file in that folder (the files a
 * test gave gpumem): the host copier's threads hold event descriptors and pipes, and read their own modules while
 * they start, until some time after a stager's disposal returned.
 */
export function openFds(under?: string): number {
  const fds = readdirSync('/proc/self/fd');
  if (under === undefined) return fds.length;
  let n = 0;
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${under}/`)) n++;
    } catch {
      // closed since the listing (the listing's own descriptor among them)
    }
  }
  return n;
}
