/**
 * How SGLang sizes its KV cache at start-up (python/sglang/srt/model_executor/model_runner.py, profile_max_num_token):
 *
 *   KV cache = memory free after loading - memory free before loading x (1 - mem_fraction_static)
 *            = mem_fraction_static x (capacity - what the process held before loading) - weights
 *
 * (its "GB" are GiB: bytes / 2^30). What it held before loading is the CUDA context and NCCL ("Init torch distributed
 * ends. mem usage=1.77-2.01 GB" at TP8 on H200s, sgl-project/sglang#11716). The rest of the GPU is left for activations
 * and CUDA graphs, captured after the pool. mem_fraction_static's default: a table by tensor-parallel size before 0.5.4;
 * from 0.5.4 (sgl-project/sglang#10975) capacity less a reserve in MiB: 512 + 1.5 x max(chunked_prefill_size, 2048)
 * + 2 x cuda_graph_max_bs + 1024 x tp x pp / 8, at least 10 GiB above 60 GiB, with chunked_prefill_size and
 * cuda_graph_max_bs by capacity (server_args.py). SGLang keeps every layer's tokens (its hybrid sliding-window pool is
 * off for Gemma 2 and 3).
 */
import type { EngineVersion } from './engine-versions.js';
import { atLeast } from './engine-versions.js';
import type { InferOptions, Line } from './options.js';
import type { EngineMemory } from './vllm.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** SGLang's chunked_prefill_size and cuda_graph_max_bs by GPU memory (MiB) and tensor-parallel size, from 0.5.4. */
export function sglangBuckets(capacityMiB: number, tp: number): { chunk: number; graphBs: number } {
  if (capacityMiB < 35 * 1024) return { chunk: 2048, graphBs: tp < 4 ? 24 : 80 };
  if (capacityMiB < 60 * 1024) return { chunk: 4096, graphBs: tp < 4 ? 32 : 160 };
  if (capacityMiB < 160 * 1024) return { chunk: 8192, graphBs: tp < 4 ? 256 : 512 };
  return { chunk: 16384, graphBs: 512 };
}

/** SGLang's default mem_fraction_static for a GPU of `capacityBytes` at tensor-parallel `tp` (pipeline 1). */
export function sglangDefaultFraction(tp: number, capacityBytes?: number, v?: EngineVersion): number {
  if (v && capacityBytes !== undefined && atLeast(v, '0.5.4')) {
    const mem = capacityBytes / MiB;
    const { chunk, graphBs } = sglangBuckets(mem, tp);
    let reserved = 512 + Math.max(chunk, 2048) * 1.5 + graphBs * 2 + (tp / 8) * 1024;
    if (mem > 60 * 1024) reserved = Math.max(reserved, 10 * 1024);
    return Math.round(((mem - reserved) / mem) * 1000) / 1000;
  }
  return tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
}

/** The KV cache budget SGLang `v` gives on a GPU of `capacityBytes`, and what it holds besides. */
export function sglangMemory(o: InferOptions, weightsBytes: number, capacityBytes: number, v: EngineVersion): EngineMemory {
  const tp = o.parallel.tp;
  const fraction = o.serve.memoryFraction ?? sglangDefaultFraction(tp, capacityBytes, v);
  // free before loading: 139.21 of an H200's 139.8 GiB at TP1 (sgl-project/sglang#4826), 1.77-2.01 GiB held at TP8 (#11716)
  const before = tp > 1 ? 2 * GiB : 0.6 * GiB;
  const graphs = o.serve.enforceEager ? 0 : 1 * GiB;
  const inside: Line[] = [
    { name: `weights (${o.weights})`, bytes: weightsBytes, note: 'exact for the model shape ("Load weight end ... mem usage")', field: 'parametersBytes' },
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
  const estimated = ['memory held before loading (context, NCCL)'];
  if (graphs) estimated.push('CUDA graphs');
  return {
    fraction,
    fractionSource:
      o.serve.memoryFraction !== undefined
        ? 'given'
        : atLeast(v, '0.5.4')
          ? `SGLang ${v.text}'s default mem_fraction_static for this GPU's memory at tensor parallel ${tp}`
          : `SGLang ${v.text}'s default mem_fraction_static for tensor parallel ${tp}`,
    budgetBytes: fraction * (capacityBytes - before),
    inside,
    outside,
    maxNumBatchedTokens: 0,
    maxNumSeqs: 0,
    honoursWindows: false,
    estimated,
  };
}
