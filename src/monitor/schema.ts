/** JSON Schema of a monitor sample (gpumem.monitor/1), for consumers of `gpumem monitor --json` and /api/sample. */
const bytes = { type: 'integer', minimum: 0 } as const;

export const MONITOR_SAMPLE_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'gpumem.monitor/1',
  type: 'object',
  required: ['schema', 'time', 'host', 'backend', 'devices', 'pools'],
  additionalProperties: false,
  properties: {
    schema: { const: 'gpumem.monitor/1' },
    time: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$' },
    host: { type: 'string' },
    backend: { enum: ['cuda', 'hip', 'host'] },
    notice: { type: 'string' },
    devices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['index', 'totalBytes', 'freeBytes', 'usedBytes', 'source'],
        additionalProperties: false,
        properties: {
          index: { type: 'integer', minimum: 0 },
          name: { type: 'string' },
          totalBytes: bytes,
          freeBytes: bytes,
          usedBytes: bytes,
          reservedBytes: bytes,
          source: { enum: ['nvml', 'rocm-smi', 'runtime', 'host'] },
          note: { type: 'string' },
          processes: {
            type: 'array',
            items: {
              type: 'object',
              required: ['pid'],
              additionalProperties: false,
              properties: { pid: { type: 'integer', minimum: 0 }, name: { type: 'string' }, usedBytes: bytes },
            },
          },
        },
      },
    },
    pools: {
      type: 'array',
      items: {
        type: 'object',
        required: [
          'name',
          'reservedBytes',
          'allocatedBytes',
          'requestedBytes',
          'peakReservedBytes',
          'freeBytes',
          'largestFreeBlockBytes',
          'fragmentation',
          'segments',
          'cacheHits',
          'cacheMisses',
        ],
        additionalProperties: false,
        properties: {
          name: { type: 'string', minLength: 1 },
          reservedBytes: bytes,
          allocatedBytes: bytes,
          requestedBytes: bytes,
          peakReservedBytes: bytes,
          freeBytes: bytes,
          largestFreeBlockBytes: bytes,
          fragmentation: { type: 'number', minimum: 0, maximum: 1 },
          segments: { type: 'integer', minimum: 0 },
          cacheHits: { type: 'integer', minimum: 0 },
          cacheMisses: { type: 'integer', minimum: 0 },
        },
      },
    },
  },
} as const;
