/**
 * On-disk cache of compiled kernel binaries, keyed by a hash of source, architecture, compiler version and options.
 * Lives in $GPUMEM_CACHE_DIR, else $XDG_CACHE_HOME/gpumem/kernels, else ~/.cache/gpumem/kernels. A cache that cannot
 * be written is not an error: the kernel is simply compiled again next time.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export function cacheDir(): string {
  if (process.env.GPUMEM_CACHE_DIR) return process.env.GPUMEM_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'gpumem', 'kernels');
}

/** The cache key of one compilation. */
export function cacheKey(parts: readonly string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 32);
}

export function readCached(key: string, ext: string): Uint8Array | undefined {
  try {
    return new Uint8Array(readFileSync(join(cacheDir(), `${key}.${ext}`)));
  } catch {
    return undefined;
  }
}

export function writeCached(key: string, ext: string, image: Uint8Array): void {
  try {
    const dir = cacheDir();
    mkdirSync(dir, { recursive: true });
    const tmp = join(dir, `${key}.${ext}.${process.pid}.tmp`);
    writeFileSync(tmp, image);
    renameSync(tmp, join(dir, `${key}.${ext}`));
  } catch {
    // an unwritable cache only costs a recompile
  }
}
