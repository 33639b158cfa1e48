/** `gpumem load-weights PATH`: a safetensors file, folder or sharded checkpoint to one device, timed and optionally verified. */
import type { Command } from 'commander';
import { ErrorCode, isGpuError } from '../errors.js';
import type { LoadWeightsReport } from '../render/load-weights-text.js';
import { formatBytes } from '../units.js';
import { interruptible, withRuntime, type Io } from './context.js';
import { UsageError } from './errors.js';
import { backendOption, parseIntOption, parsePositive } from './options.js';

/** The options of `load-weights` as commander parses them. */
export interface LoadWeightsCliOptions {
  backend?: string;
  device: number;
  filter?: string;
  repeat: number;
  verify?: boolean;
  json?: boolean;
}

/** Adds `load-weights` to the program. */
export function defineLoadWeights(program: Command, io: Io): void {
  program
    .command('load-weights')
    .description('load a safetensors checkpoint (a file, a folder, or a sharded one through its index) into device memory, timed')
    .argument('<path>', 'a .safetensors file, a folder holding model.safetensors or model.safetensors.index.json, or such an index')
    .addOption(backendOption())
    .option('--device <n>', 'the device to load to', (v) => parseIntOption(v, '--device'), 0)
    .option('--filter <regex>', 'load only the tensors whose names match this regular expression')
    .option('--repeat <n>', 'load it n times (each into a fresh allocation) and report each run and the median', (v) => parsePositive(v, '--repeat'), 1)
    .option('--verify', 'read every loaded byte back from the device and compare it with the file')
    .option('--json', 'print JSON: { files, tensors: [...], bytes, reads, runs: [{ seconds, gbps }], medianGBps, paths, verified }')
    .addHelpText(
      'after',
      `
The header of every file is checked against the safetensors format's rules before anything is allocated; a file
that breaks one exits with code 2 and the rule it broke. GB/s counts the bytes read from the files (GB = 1e9), from
the call until the last byte arrived, headers included.

Examples:
  $ gpumem load-weights model.safetensors
  $ gpumem load-weights ./Qwen2-0.5B --device 1 --verify
  $ gpumem load-weights model.safetensors.index.json --filter '^model\\.layers\\.0\\.' --json`,
    )
    .action((path: string, opts: LoadWeightsCliOptions) => runLoadWeights(path, opts, io));
}

async function runLoadWeights(path: string, opts: LoadWeightsCliOptions, io: Io): Promise<void> {
  let filter: RegExp | undefined;
  try {
    filter = opts.filter === undefined ? undefined : new RegExp(opts.filter);
  } catch (e) {
    throw new UsageError(`--filter ${opts.filter}: not a regular expression (${e instanceof Error ? e.message : String(e)})`);
  }
  const { loadSafetensors } = await import('../runtime/safetensors.js');
  const { verifyLoaded } = await import('../runtime/safetensors-io.js');
  const { renderLoadWeights } = await import('../render/load-weights-text.js');
  await withRuntime({ ...opts, transfers: true }, io, (rt) =>
    interruptible(
      io,
      (e) => isGpuError(e, ErrorCode.ABORTED),
      async (signal) => {
        const device = rt.device(opts.device);
        const verify = (tensors: Parameters<typeof verifyLoaded>[1], bytes: number): ReturnType<typeof verifyLoaded> => {
          io.err(`verifying ${formatBytes(bytes)} on device ${device.index} against the files...\n`);
          return verifyLoaded(rt, tensors, { signal });
        };
        const runs: LoadWeightsReport['runs'] = [];
        let report: LoadWeightsReport | undefined;
        for (let i = 0; i < opts.repeat; i++) {
          using loaded = await loadSafetensors(path, device, { signal, ...(filter ? { filter: (n: string) => filter.test(n) } : {}) });
          runs.push({ seconds: loaded.seconds, gbps: loaded.gbps });
          if (i < opts.repeat - 1) continue;
          const tensors = [...loaded.tensors.values()];
          const sorted = runs.map((r) => r.gbps).sort((a, b) => a - b);
          const mid = sorted.length >> 1;
          report = {
            backend: rt.backend.name,
            device: device.index,
            path,
            files: [...loaded.files],
            tensors: tensors.map((t) => ({
              name: t.name,
              dtype: t.dtype,
              shape: [...t.shape],
              bytes: t.bytes,
              byteOffset: t.byteOffset,
              file: t.file,
              fileOffset: t.fileOffset,
            })),
            bytes: loaded.bytes,
            reads: loaded.reads,
            runs,
            medianGBps: sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2,
            paths: [...loaded.paths],
            verified: opts.verify ? await verify(tensors, loaded.bytes) : undefined,
          };
        }
        io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderLoadWeights(report!)}\n`);
        if (report?.verified && !report.verified.ok) throw new Error('the device holds bytes that differ from the file (see above)');
      },
    ),
  );
}
