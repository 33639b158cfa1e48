/**
 * PYTORCH_CUDA_ALLOC_CONF (PYTORCH_ALLOC_CONF in newer releases) as PyTorch's native caching allocator reads it:
 * c10/core/AllocatorConfig.cpp (parseArgs) and c10/cuda/CUDACachingAllocator.cpp. Options are `key:value` pairs
 * separated by commas; an unknown key is an error there ("Unrecognized CachingAllocator option") and here.
 *
 * - `expandable_segments:True|False` (default False);
 * - `max_split_size_mb:N` (default unlimited; at least 20, `min_allowed_split_size_mb = kLargeBuffer / kMB`);
 * - `max_non_split_rounding_mb:N` (default 20, kLargeBuffer; at least 20);
 * - `roundup_power2_divisions:N` or `[256:1,512:2,>:4]` (per power-of-two interval from 1 MiB to 64 GiB, each value
 *   0 or a power of two; the first key's value also fills the intervals below it, `>` the ones above);
 * - `garbage_collection_threshold:F` with 0 < F < 1 (acts only after torch.cuda.set_per_process_memory_fraction);
 * - `backend:native|cudaMallocAsync` (the async backend ignores the rest; it is refused here, as nothing models it);
 * - `release_lock_on_cudamalloc`, `pinned_use_cuda_host_register`, `pinned_num_register_threads`,
 *   `pinned_use_background_threads`: accepted and ignored (they change no device figure).
 */
import { InvalidArgumentError } from '../errors.js';

const MiB = 1024 * 1024;

/** The allocator settings the model follows. */
export interface AllocConf {
  expandableSegments: boolean;
  /** Blocks of at least this many bytes are never split (Infinity: unset). */
  maxSplitBytes: number;
  /** An oversize cached block serves a request of at least max_split only if it is less than this much larger. */
  maxNonSplitRoundingBytes: number;
  /** Divisions per power-of-two interval, index floor(log2(size)) - 20 clamped to 0..15 (0 or 1: none). */
  roundupPower2Divisions: readonly number[];
  /** 0: off. */
  garbageCollectionThreshold: number;
}

/** The allocator as a stock PyTorch runs it (no PYTORCH_CUDA_ALLOC_CONF). */
export const DEFAULT_ALLOC_CONF: AllocConf = Object.freeze({
  expandableSegments: false,
  maxSplitBytes: Number.POSITIVE_INFINITY,
  maxNonSplitRoundingBytes: 20 * MiB,
  roundupPower2Divisions: Object.freeze(new Array<number>(16).fill(0)),
  garbageCollectionThreshold: 0,
});

const IGNORED = new Set(['release_lock_on_cudamalloc', 'pinned_use_cuda_host_register', 'pinned_num_register_threads', 'pinned_use_background_threads']);

const fail = (text: string, why: string): never => {
  throw new InvalidArgumentError(`PYTORCH_CUDA_ALLOC_CONF "${text.slice(0, 200)}": ${why}`);
};

const isPowerOf2OrZero = (n: number): boolean => Number.isInteger(n) && n >= 0 && (n & (n - 1)) === 0;

function megabytes(text: string, key: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 20) fail(text, `${key} is a whole number of MiB, at least 20 (was "${value}")`);
  return n * MiB;
}

/** `roundup_power2_divisions`: one value for every interval or a list `[size_mb:divisions,...,>:divisions]`. */
function divisions(text: string, value: string): number[] {
  const out = new Array<number>(16).fill(0);
  const check = (v: string): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || !isPowerOf2OrZero(n)) fail(text, `roundup_power2_divisions values are 0 or a power of two (was "${v}")`);
    return n;
  };
  if (!value.startsWith('[')) return out.fill(check(value));
  if (!value.endsWith(']')) fail(text, 'roundup_power2_divisions list has no closing ]');
  const pairs = value
    .slice(1, -1)
    .split(',')
    .filter((p) => p !== '');
  let last = -1;
  for (const [i, pair] of pairs.entries()) {
    const [k, v] = pair.split(':');
    if (k === undefined || v === undefined) return fail(text, `roundup_power2_divisions entry "${pair}" is not size:divisions`);
    const n = check(v);
    if (k === '>') {
      out.fill(n, last + 1);
      continue;
    }
    const mb = Number(k);
    if (!/^\d+$/.test(k) || !isPowerOf2OrZero(mb) || mb === 0) fail(text, `roundup_power2_divisions size "${k}" is a power of two in MiB`);
    const index = Math.min(15, Math.max(0, Math.log2(mb)));
    if (i === 0) out.fill(n, 0, index + 1);
    out[index] = n;
    last = index;
  }
  return out;
}

/** One `key:value` option applied to `conf`. */
function apply(conf: AllocConf, text: string, key: string, value: string): AllocConf {
  switch (key) {
    case 'expandable_segments':
      if (value !== 'True' && value !== 'False') fail(text, `expandable_segments is True or False (was "${value}")`);
      return { ...conf, expandableSegments: value === 'True' };
    case 'max_split_size_mb':
      return { ...conf, maxSplitBytes: megabytes(text, key, value) };
    case 'max_non_split_rounding_mb':
      return { ...conf, maxNonSplitRoundingBytes: megabytes(text, key, value) };
    case 'roundup_power2_divisions':
      return { ...conf, roundupPower2Divisions: divisions(text, value) };
    case 'garbage_collection_threshold': {
      const f = Number(value);
      if (!(f > 0 && f < 1)) fail(text, `garbage_collection_threshold is a fraction between 0 and 1 (was "${value}")`);
      return { ...conf, garbageCollectionThreshold: f };
    }
    case 'backend':
      if (value === 'native') return conf;
      return fail(text, `backend:${value} is not modelled (cudaMallocAsync ignores the native allocator's options)`);
    default:
      if (IGNORED.has(key)) return conf;
      return fail(text, `unknown option "${key}" (PyTorch refuses it too: "Unrecognized CachingAllocator option")`);
  }
}

/**
 * Reads a PYTORCH_CUDA_ALLOC_CONF value ("expandable_segments:True,max_split_size_mb:128"); "" is the default.
 * @throws InvalidArgumentError (INVALID_ARGUMENT) for an unknown option or a value PyTorch would refuse
 */
export function parseAllocConf(text: string): AllocConf {
  let conf: AllocConf = DEFAULT_ALLOC_CONF;
  const body = text.replace(/\s+/g, '');
  // commas inside a [...] list belong to it
  for (const option of body.split(/,(?![^[]*\])/)) {
    if (option === '') continue;
    const colon = option.indexOf(':');
    if (colon <= 0) fail(text, `"${option}" is not key:value`);
    conf = apply(conf, text, option.slice(0, colon), option.slice(colon + 1));
  }
  return conf;
}

/** The PYTORCH_CUDA_ALLOC_CONF text of `conf`, the options that differ from the default only ("" for it). */
export function formatAllocConf(conf: AllocConf): string {
  const parts: string[] = [];
  if (conf.expandableSegments) parts.push('expandable_segments:True');
  if (Number.isFinite(conf.maxSplitBytes)) parts.push(`max_split_size_mb:${conf.maxSplitBytes / MiB}`);
  if (conf.maxNonSplitRoundingBytes !== 20 * MiB) parts.push(`max_non_split_rounding_mb:${conf.maxNonSplitRoundingBytes / MiB}`);
  const d = conf.roundupPower2Divisions;
  if (d.some((v) => v > 1)) parts.push(`roundup_power2_divisions:${d.every((v) => v === d[0]) ? d[0] : `[${d.map((v, i) => `${2 ** i}:${v}`).join(',')}]`}`);
  if (conf.garbageCollectionThreshold > 0) parts.push(`garbage_collection_threshold:${conf.garbageCollectionThreshold}`);
  return parts.join(',');
}

/**
 * The size a request is rounded to (round_size): 512 bytes at least; with divisions for its interval, the next
 * division of its power-of-two interval ("round-up 1200 and number of divisions is 4 ... return 1280").
 */
export function roundRequest(bytes: number, conf: AllocConf = DEFAULT_ALLOC_CONF): number {
  if (bytes < 512) return 512;
  const index = Math.min(15, Math.max(0, Math.floor(Math.log2(bytes)) - 20));
  const div = conf.roundupPower2Divisions[index] ?? 0;
  if (div > 1 && bytes > 512 * div) {
    const floor = 2 ** Math.floor(Math.log2(bytes));
    if (floor === bytes) return bytes;
    const step = floor / div;
    return Math.ceil(bytes / step) * step;
  }
  return Math.ceil(bytes / 512) * 512;
}
