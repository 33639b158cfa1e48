/**
 * A worker thread of `analyzeRanks`: analyses one rank's trace per message and sends back its result as one JSON
 * string and its figures as a transferred Float64Array.
 */
import { parentPort } from 'node:worker_threads';
import { isGpuError, ErrorCode } from '../errors.js';
import { analyzeFiles, type TraceFormat } from './analyze.js';
import type { JsonReader } from './importers/kineto.js';
import { rankMetrics } from './ranks.js';

interface Job {
  id: number;
  file: string;
  format: TraceFormat;
  fromBench?: string;
  jsonReader?: JsonReader;
}

parentPort?.on('message', (job: Job) => {
  analyzeFiles([job.file], { format: job.format, fromBench: job.fromBench, jsonReader: job.jsonReader }).then(
    (r) => {
      const metrics = rankMetrics(r);
      parentPort?.postMessage({ id: job.id, json: JSON.stringify(r), metrics }, [metrics.buffer as ArrayBuffer]);
    },
    (e: unknown) => {
      const message = e instanceof Error ? e.message : String(e);
      parentPort?.postMessage({ id: job.id, error: { message, bad: isGpuError(e, ErrorCode.BAD_INPUT) } });
    },
  );
});
