/** Allocation-trace replay against pool configurations (`gpumem/replay`); pure TypeScript, no native library. */
export {
  replay,
  recordedFacts,
  DEFAULT_CONFIGURATIONS,
  type ReplayConfiguration,
  type ReplayReport,
  type ConfigurationResult,
  type RecordedFacts,
} from './replay.js';
export { readTrace, detectFormat as detectReplayFormat, type Trace, type TraceFormat as ReplayTraceFormat } from '../formats/allocator-trace.js';
