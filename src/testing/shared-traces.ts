/**
 * Tests that read ../shared/traces: files other projects published, read in place beside the checkout (or beside
 * the folder of worktrees that holds it). A user's clone has no such folder: there the tests are not registered one
 * by one, each skipped with the same reason, but counted into one skipped test per file that says how many need the
 * folder and where the README says what it holds.
 */
import { existsSync } from 'node:fs';
import { type TestContext, test } from 'node:test';

/** The shared traces folder (ending in /), or undefined where it is absent. */
export const SHARED_TRACES: string | undefined = ['../../../shared/traces/', '../../../../shared/traces/']
  .map((p) => new URL(p, import.meta.url).pathname)
  .find(existsSync);

/** A path under the shared traces folder (a path that does not exist where the folder is absent). */
export const sharedTrace = (path: string): string => `${SHARED_TRACES ?? '../shared/traces/'}${path}`;

let absent = 0;

/**
 * Registers a test that reads the shared traces; where they are absent, counts it into this file's one skipped test.
 * `options.skip` is another reason to skip it (a missing browser), said as usual.
 */
export function sharedTest(name: string, options: { skip?: string | false }, fn: (t: TestContext) => void | Promise<void>): void {
  if (SHARED_TRACES) {
    test(name, { skip: options.skip ?? false }, fn);
    return;
  }
  // the tests of a file register as it loads: the count is complete by the next turn of the event loop
  if (absent++ === 0)
    setImmediate(() =>
      test(`${absent} test${absent === 1 ? '' : 's'} of this file read ../shared/traces`, {
        skip: "../shared/traces is absent beside the checkout (the README's Tests section says what it holds)",
      }, () => {}),
    );
}
