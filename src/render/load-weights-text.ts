/** `gpumem load-weights PATH`: what was loaded, how fast, and which way the bytes went, as text. */
import { formatBytes, formatDecimalBytes } from '../units.js';
import { table } from './text.js';

/** The result of `gpumem load-weights` (its --json output). */
export interface LoadWeightsReport {
  backend: string;
  device: number;
  path: string;
  files: string[];
  tensors: Array<{ name: string; dtype: string; shape: number[]; bytes: number; byteOffset: number; file: string; fileOffset: number }>;
  /** Bytes read from the files per load, and the file ranges (reads) they took. */
  bytes: number;
  reads: number;
  /** Each load, from the call until the last byte arrived; GB/s with GB = 1e9, one-way bytes. */
  runs: Array<{ seconds: number; gbps: number }>;
  medianGBps: number;
  /** How the bytes went from the files to the device (buffered: read into pinned host memory, then copied). */
  paths: string[];
  /** With --verify: every loaded byte compared with its file. */
  verified?: { ok: boolean; bytes: number; mismatch?: { name: string; byte: number } } | undefined;
}

const SHOWN = 12;

/** The text `load-weights` prints: a summary, each run, the verification, and the first tensors. */
export function renderLoadWeights(r: LoadWeightsReport): string {
  const out: string[] = [];
  const files = r.files.length === 1 ? '1 file' : `${r.files.length} files`;
  out.push(
    `loaded ${r.path}: ${r.tensors.length} tensors, ${formatDecimalBytes(r.bytes)} (${formatBytes(r.bytes)}) from ${files} in ${r.reads} read${r.reads === 1 ? '' : 's'}`,
  );
  out.push(`to device ${r.device} (backend: ${r.backend}), file to device: ${r.paths.join(', ') || 'nothing to read'}`);
  for (const [i, run] of r.runs.entries()) {
    out.push(`  ${r.runs.length > 1 ? `run ${i + 1}: ` : ''}${run.seconds.toFixed(3)} s, ${run.gbps.toFixed(2)} GB/s`);
  }
  if (r.runs.length > 1) out.push(`  median: ${r.medianGBps.toFixed(2)} GB/s (GB = 1e9 bytes, from the call until the last byte arrived)`);
  if (r.verified) {
    out.push(
      r.verified.ok
        ? `verified: all ${formatBytes(r.verified.bytes)} on the device match the file`
        : `VERIFY FAILED: tensor "${r.verified.mismatch?.name}" differs from the file at its byte ${r.verified.mismatch?.byte}`,
    );
  }
  out.push('');
  out.push(
    table(
      ['tensor', 'dtype', 'shape', '>bytes', '>offset'],
      r.tensors.slice(0, SHOWN).map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, formatBytes(t.bytes), t.byteOffset]),
    ),
  );
  if (r.tensors.length > SHOWN) out.push(`... and ${r.tensors.length - SHOWN} more (--json lists every tensor)`);
  return out.join('\n');
}
