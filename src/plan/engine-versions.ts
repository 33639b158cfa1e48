/**
 * Which release of a serving engine a plan follows (`--engine-version`). The engines changed how they account for
 * memory between releases; each figure names the release whose start-up it follows.
 */
import { InvalidArgumentError } from '../errors.js';

export interface EngineVersion {
  major: number;
  minor: number;
  patch: number;
  /** As given, or the newest gpumem follows. */
  text: string;
}

/** The newest vLLM release gpumem follows (and the default). */
export const VLLM_NEWEST = '0.27';
/** The oldest: before 0.6 the profile measured whatever the GPU held, other processes' memory included. */
export const VLLM_OLDEST = '0.6';
/** The newest SGLang release gpumem follows (and the default). */
export const SGLANG_NEWEST = '0.5.4';
export const SGLANG_OLDEST = '0.3';

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
 * Parses "0.10" or "0.10.2" for `engine`; undefined gives the newest release gpumem follows.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export function parseEngineVersion(engine: 'vllm' | 'sglang', text: string | undefined): EngineVersion {
  const [oldest, newest] = engine === 'vllm' ? [VLLM_OLDEST, VLLM_NEWEST] : [SGLANG_OLDEST, SGLANG_NEWEST];
  const v = parts(text ?? newest);
  if (!v) throw new InvalidArgumentError(`--engine-version must be a release like ${newest}, got "${text}"`);
  if (compare(v, parts(oldest)!) < 0 || compare(v, parts(newest)!) > 0)
    throw new InvalidArgumentError(`--engine-version ${v.text}: gpumem follows ${engine === 'vllm' ? 'vLLM' : 'SGLang'} ${oldest} to ${newest}`);
  return v;
}

/** True when `v` is `release` ("0.10", "0.5.4") or later. */
export function atLeast(v: EngineVersion, release: string): boolean {
  return compare(v, parts(release)!) >= 0;
}
