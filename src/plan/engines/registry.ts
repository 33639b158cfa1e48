/** The serving engines by name: a new engine is a file here and a line below; a new release is a row in its table. */
import { sglang } from './sglang.js';
import type { ServingEngine } from './types.js';
import { type EngineVersion, parseVersion } from './versions.js';
import { vllm } from './vllm.js';

export const ENGINES: Record<'vllm' | 'sglang', ServingEngine> = { vllm, sglang };

/**
 * The release of `engine` a plan follows: "0.10" or "0.10.2"; undefined gives the newest gpumem follows.
 * @throws InvalidArgumentError for a malformed version or one outside the releases gpumem follows.
 */
export const parseEngineVersion = (engine: 'vllm' | 'sglang', text: string | undefined): EngineVersion => parseVersion(ENGINES[engine], text);
