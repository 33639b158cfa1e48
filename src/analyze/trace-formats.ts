/** The trace formats `gpumem analyze` reads (its own module, so that the CLI names them without loading the readers). */
export const TRACE_FORMATS = [
  'kineto',
  'rocpd',
  'rocprofv3-json',
  'rocprof-csv',
  'rocprof-json',
  'rocprof-db',
  'nsys-sqlite',
  'nvvp',
  'nvprof-csv',
  'memory-snapshot',
  'alloc-log',
] as const;
export type TraceFormat = (typeof TRACE_FORMATS)[number];
