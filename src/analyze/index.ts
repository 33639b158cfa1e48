/**
 * `gpumem/analyze`: profiler and allocator traces turned into findings. Pure TypeScript: importing it loads no GPU
 * library and no native addon (reading an SQLite database, an Nsight Systems export or a rocprofv3 rocpd database,
 * loads SQLite's WebAssembly build when it is used).
 *
 * ```ts
 * import { analyzeFiles } from 'gpumem/analyze';
 * const result = await analyzeFiles(['trace.pt.trace.json.gz']);
 * ```
 */
export { analyzeFiles, analyzeModel, loadTraces, detectTraceFormat, TRACE_FORMATS, type TraceFormat, type AnalyzeOptions } from './analyze.js';
export { defaultRates, ratesForModel, ratesFromBench, type CopyRates } from './bandwidth.js';
export { timelineOf, type Timeline, type TimelineBar } from './timeline.js';
export type { AnalyzeResult, Finding, Severity, Summary, CopyGroup } from './result.js';
export { RULES, type Rule } from './rules/index.js';
export { analyzeRanks, RANK_FORMATS, type RanksOptions, type RanksResult, type RankResult, type Straggler } from './ranks.js';
export type { DeviceFigures } from './result.js';
export type { JsonReader } from './importers/kineto.js';
