/**
 * Which release of a serving engine a plan follows (`--engine-version`), and the row of its release table: the
 * engines changed how they account for memory between releases; each figure names the release whose start-up it
 * follows.
 */
import { InvalidArgumentError } from '../../errors.js';

export interface EngineVersion {
  major: number;
  minor: number;
  patch: number;
  /** As given, or the newest gpumem follows. */
  text: string;
}

const PATTERN = /^(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?$/;

function parts(text: string): EngineVersion | undefined {
  const m = PATTERN.exec(text.trim());
  return m ? { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3] ?? 0), text: text.trim() } : undefined;
}

/** Negative when `a` is an earlier release than `b`, 0 when the same. */
function compare(a: EngineVersion, b: EngineVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch;
}

/**
 * Parses "0.10" or "0.10.2" for an engine that follows releases `oldest` to `newest`; undefined gives the newest.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export function parseVersion(e: { label: string; oldest: string; newest: string; option?: string }, text: string | undefined): EngineVersion {
  const option = e.option ?? '--engine-version';
  const v = parts(text ?? e.newest);
  if (!v) throw new InvalidArgumentError(`${option} must be a release like ${e.newest}, got "${text}"`);
  if (compare(v, parts(e.oldest)!) < 0 || compare(v, parts(e.newest)!) > 0)
    throw new InvalidArgumentError(`${option} ${v.text}: gpumem follows ${e.label} ${e.oldest} to ${e.newest}`);
  return v;
}

/** The row of a release table (rows sorted by `from`, each holding until the next) that release `v` follows. */
export function releaseRow<R extends { from: string }>(table: readonly R[], v: EngineVersion): R {
  let row = table[0] as R;
  for (const r of table) if (atLeast(v, r.from)) row = r;
  return row;
}

/** True when `v` is `release` ("0.10", "0.5.4") or later. */
export function atLeast(v: EngineVersion, release: string): boolean {
  return compare(v, parts(release)!) >= 0;
}
