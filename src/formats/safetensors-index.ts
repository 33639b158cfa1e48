/**
 * The index of a sharded safetensors checkpoint, `model.safetensors.index.json` as Hugging Face writes it:
 * `{ "metadata": { "total_size": ... }, "weight_map": { "<tensor name>": "<shard file name>", ... } }`.
 */
import { JsonNumber, parseStrictJson, type StrictJson } from '../input/json-strict.js';
import { quoteValue } from '../input/quote.js';
import { isPlainObject, SafetensorsError } from './safetensors.js';

/** The index of a sharded checkpoint (`model.safetensors.index.json`). */
export interface SafetensorsIndex {
  /** Tensor name to shard file name, in the index's order. */
  readonly weightMap: ReadonlyMap<string, string>;
  /** Shard file names, each once, in order of first appearance. */
  readonly shards: readonly string[];
  /** The index's own `metadata` object (total_size and the like), as written. */
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
}

/**
 * Parses a shard index. Shard names must be plain file names beside the index (no folder, no `..`).
 * @throws SafetensorsError bad-index
 */
export function parseShardIndex(text: string, file?: string): SafetensorsIndex {
  const fail = (message: string, cause?: unknown): never => {
    throw new SafetensorsError('bad-index', message, file, cause);
  };
  let root: unknown;
  try {
    root = plain(parseStrictJson(text, { maxDepth: 16 }));
  } catch (e) {
    fail(`not JSON: ${e instanceof Error ? e.message : String(e)}`, e);
  }
  if (isPlainObject(root) && !isPlainObject(root.weight_map) && ['model_type', 'architectures', 'hidden_size'].some((k) => k in root))
    return fail(
      'a model config (config.json: model_type, architectures, sizes), not a checkpoint or a shard index: give the model folder, its *.safetensors files, or its model.safetensors.index.json',
    );
  if (!isPlainObject(root) || !isPlainObject(root.weight_map))
    return fail('not a shard index: a model.safetensors.index.json holds a "weight_map" object (tensor name to shard file), and this JSON has none');
  if (root.metadata !== undefined && root.metadata !== null && !isPlainObject(root.metadata)) fail('"metadata" must be an object');
  const weightMap = new Map<string, string>();
  const shards = new Set<string>();
  for (const [name, shard] of Object.entries(root.weight_map)) {
    if (typeof shard !== 'string' || shard === '' || shard === '.' || shard === '..' || /[/\\\0]/.test(shard)) {
      fail(`weight_map[${quoteValue(name)}]: expected a file name beside the index, got ${typeof shard === 'string' ? quoteValue(shard) : typeof shard}`);
    }
    weightMap.set(name, shard as string);
    shards.add(shard as string);
  }
  return { weightMap, shards: [...shards], metadata: isPlainObject(root.metadata) ? root.metadata : undefined };
}

/** The parsed JSON with numbers as numbers (the index's figures are sizes no larger than a double holds). */
function plain(v: StrictJson): unknown {
  if (v instanceof JsonNumber) return Number(v.text);
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') {
    // no prototype: a key "__proto__" stays a key
    const out = Object.create(null) as Record<string, unknown>;
    for (const [k, x] of Object.entries(v)) out[k] = plain(x);
    return out;
  }
  return v;
}
