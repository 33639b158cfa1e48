/**
 * The parts of Grafana's dashboard JSON model that gpumem's dashboard uses, as JSON Schema, written from Grafana's
 * documented dashboard kind (docs/sources/developers/kinds/core/dashboard/schema-reference.md: spec, panels,
 * DataSourceRef, GridPos, templating): required fields, types and allowed values. Grafana accepts more fields than
 * these; the schema checks that the dashboard in deploy/grafana/ imports as is.
 */
const datasourceRef = {
  type: 'object',
  additionalProperties: false,
  properties: { type: { type: 'string' }, uid: { type: 'string' } },
} as const;

const thresholds = {
  type: 'object',
  required: ['mode', 'steps'],
  properties: {
    mode: { enum: ['absolute', 'percentage'] },
    steps: {
      type: 'array',
      minItems: 1,
      items: { type: 'object', required: ['color', 'value'], properties: { color: { type: 'string' }, value: { type: ['number', 'null'] } } },
    },
  },
} as const;

export const GRAFANA_DASHBOARD_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Grafana dashboard (the fields gpumem uses)',
  type: 'object',
  required: ['schemaVersion', 'title', 'uid', 'panels'],
  properties: {
    schemaVersion: { type: 'integer', minimum: 0, maximum: 65535 },
    title: { type: 'string', minLength: 1 },
    uid: { type: 'string', minLength: 8, maxLength: 40 },
    description: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' } },
    editable: { type: 'boolean' },
    graphTooltip: { enum: [0, 1, 2] },
    timezone: { type: 'string' },
    refresh: { type: 'string', pattern: '^\\d+[smhd]$' },
    version: { type: 'integer', minimum: 0 },
    time: { type: 'object', required: ['from', 'to'], properties: { from: { type: 'string' }, to: { type: 'string' } } },
    annotations: { type: 'object', properties: { list: { type: 'array' } } },
    templating: {
      type: 'object',
      required: ['list'],
      properties: {
        list: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name', 'type'],
            properties: {
              name: { type: 'string', pattern: '^\\w+$' },
              type: { enum: ['query', 'adhoc', 'constant', 'datasource', 'interval', 'textbox', 'custom', 'system'] },
              datasource: datasourceRef,
              query: {},
              refresh: { enum: [0, 1, 2] },
              multi: { type: 'boolean' },
              includeAll: { type: 'boolean' },
            },
          },
        },
      },
    },
    panels: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['id', 'type', 'title', 'gridPos', 'targets'],
        properties: {
          id: { type: 'integer', minimum: 1 },
          type: { enum: ['timeseries', 'stat', 'gauge', 'bargauge', 'table', 'text', 'state-timeline', 'heatmap'] },
          title: { type: 'string', minLength: 1 },
          description: { type: 'string' },
          datasource: datasourceRef,
          gridPos: {
            type: 'object',
            required: ['h', 'w', 'x', 'y'],
            additionalProperties: false,
            properties: {
              h: { type: 'integer', minimum: 1 },
              w: { type: 'integer', minimum: 1, maximum: 24 },
              x: { type: 'integer', minimum: 0, maximum: 23 },
              y: { type: 'integer', minimum: 0 },
            },
          },
          targets: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              required: ['refId', 'expr'],
              properties: {
                refId: { type: 'string', minLength: 1 },
                expr: { type: 'string', minLength: 1 },
                legendFormat: { type: 'string' },
                datasource: datasourceRef,
              },
            },
          },
          fieldConfig: {
            type: 'object',
            required: ['defaults', 'overrides'],
            properties: {
              defaults: { type: 'object', properties: { unit: { type: 'string' }, thresholds, mappings: { type: 'array' }, max: { type: 'number' } } },
              overrides: { type: 'array' },
            },
          },
          options: { type: 'object' },
        },
      },
    },
  },
} as const;
