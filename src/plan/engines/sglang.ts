/**
 * How SGLang sizes its KV cache at start-up (python/sglang/srt/model_executor/model_runner.py, profile_max_num_token;
 * the same idea in every release read, 0.3.0 to 0.5.18):
 *
 *   KV pool = memory free after loading - memory free before loading x (1 - mem_fraction_static)
 *           = mem_fraction_static x (capacity - what the process held before loading) - weights
 *
 * (its "GB" are GiB). What it held before loading is the CUDA context and NCCL, measured after torch.distributed's
 * initialisation. The rest of the GPU is left for activations and CUDA graphs, captured after the pool.
 * mem_fraction_static's default follows the release (sglang-releases.ts). SGLang keeps every layer's tokens (Gemma 2
 * and 3 are not among its hybrid sliding-window architectures).
 */
import type { Line } from '../options.js';
import { SGLANG_RELEASES } from './sglang-releases.js';
import type { EngineMemory, EngineRequest, ServingEngine } from './types.js';
import { releaseRow } from './versions.js';

const GiB = 2 ** 30;

export const SGLANG_CONSTANTS = {
  /** Held before loading at TP 1: 139.21 of an H200's 139.8 GiB free (sgl-project/sglang#4826). */
  beforeLoadingBytes: { value: 0.6 * GiB, source: 'sgl-project/sglang#4826: 139.21 of 139.8 GiB free before loading on an H200' },
  /** Held before loading with NCCL at TP 2 or more ("Init torch distributed ends. mem usage=1.77-2.01 GB" at TP 8). */
  beforeLoadingNcclBytes: { value: 2 * GiB, source: 'sgl-project/sglang#11716: 1.77-2.01 GB at TP 8 on H200s' },
  /** CUDA graphs of the default capture sizes, captured after the pool. */
  graphsBytes: { value: 1 * GiB, source: 'estimate: "Capture cuda graph end ... mem usage" in published start-ups' },
};

/** SGLang's default mem_fraction_static for the release, a GPU of `capacityBytes` and tensor-parallel `tp`. */
export const sglangDefaultFraction = (r: Pick<EngineRequest, 'version' | 'capacityBytes'>, tp: number): number =>
  releaseRow(SGLANG_RELEASES, r.version).fraction(r.capacityBytes, tp);

function sglangMemory(r: EngineRequest): EngineMemory {
  const { o, capacityBytes } = r;
  const tp = o.parallel.tp;
  const row = releaseRow(SGLANG_RELEASES, r.version);
  const fraction = o.serve.memoryFraction ?? row.fraction(capacityBytes, tp * o.parallel.pp);
  const before = tp > 1 ? SGLANG_CONSTANTS.beforeLoadingNcclBytes.value : SGLANG_CONSTANTS.beforeLoadingBytes.value;
  const graphs = o.serve.enforceEager ? 0 : SGLANG_CONSTANTS.graphsBytes.value;
  const inside: Line[] = [
    { name: `weights (${o.weights})`, bytes: r.weightsBytes, note: 'exact for the model shape ("Load weight end ... mem usage")', field: 'parametersBytes' },
  ];
  const outside: Line[] = [
    {
      name: 'held before loading (CUDA context, NCCL)',
      bytes: before,
      note: `SGLang takes ${fraction} of what is free after it ("Init torch distributed ends. mem usage"): estimated`,
      field: 'overheadBytes',
    },
  ];
  if (graphs)
    outside.push({
      name: 'CUDA graphs',
      bytes: graphs,
      note: 'captured after the pool ("Capture cuda graph end ... mem usage"): estimated',
      field: 'overheadBytes',
    });
  return {
    fraction,
    fractionSource: o.serve.memoryFraction !== undefined ? 'given' : `SGLang ${r.version.text}'s default mem_fraction_static: ${row.rule}`,
    budgetBytes: fraction * (capacityBytes - before),
    inside,
    outside,
    maxNumBatchedTokens: 0,
    maxNumSeqs: 0,
    honoursWindows: false,
    maxModelLen: r.maxModelLen,
    printedTokens: 'blocks',
    estimated: ['memory held before loading (context, NCCL)', ...(graphs ? ['CUDA graphs'] : [])],
  };
}

export const sglang: ServingEngine = { name: 'sglang', label: 'SGLang', oldest: '0.3', newest: '0.5.18', blockSize: 1, memory: sglangMemory };
