/**
 * Temporary folders that never outlive the process: each is removed by its owner when done, and whatever is left
 * when the process exits (an interrupt that could not wait for the owner's `finally`) is removed on the way out.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const live = new Set<string>();
let hooked = false;

/** Removes every folder still registered (synchronously: it runs in the process's 'exit' event). */
function removeAll(): void {
  for (const dir of live) rmSync(dir, { recursive: true, force: true });
  live.clear();
}

/** Makes a folder `prefix` + random under `base` (default the system's temporary folder) and registers it. */
export function makeTempFolder(prefix: string, base: string = tmpdir()): string {
  if (!hooked) {
    process.on('exit', removeAll);
    hooked = true;
  }
  const dir = mkdtempSync(join(base, prefix));
  live.add(dir);
  return dir;
}

/** Removes a folder made by makeTempFolder, and everything in it. */
export function removeTempFolder(dir: string): void {
  live.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** The folders made and not yet removed (for tests and for a check at exit). */
export function tempFoldersLeft(): readonly string[] {
  return [...live];
}
