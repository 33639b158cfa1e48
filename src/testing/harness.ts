/** What tests share: running the CLI in-process, and opening a generated HTML page in a real headless Chromium. */
import { existsSync } from 'node:fs';
import { main } from '../cli/program.js';

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
    return { value: (await page.evaluate(script)) as T, errors };
  } finally {
    await browser.close();
  }
}
