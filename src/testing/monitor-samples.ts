/**
 * What the monitor's tests share: a two-device host runtime, the sample schema as a check, and an independent parser
 * of the Prometheus text format (parse-prometheus-text-format, not the exporter's own code).
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Ajv } from 'ajv';
import { MONITOR_SAMPLE_SCHEMA } from '../monitor/schema.js';
import { openRuntime, type Runtime } from '../runtime/runtime.js';

const require = createRequire(import.meta.url);

/** One family of the Prometheus text as the independent parser reads it. */
export interface PrometheusFamily {
  name: string;
  help: string;
  type: string;
  metrics: Array<{ value: string; labels?: Record<string, string> }>;
}

/** Parses Prometheus exposition text with parse-prometheus-text-format. @throws Error on text it cannot parse. */
export const parsePrometheus = require('parse-prometheus-text-format') as (text: string) => PrometheusFamily[];

/** A host runtime of two 1 GiB devices. @throws GpuError if the host backend cannot open. */
export const twoDeviceHost = (): Runtime => openRuntime({ backend: 'host', host: { devices: 2, deviceBytes: 1 << 30 } });

const ajv = new Ajv({ allErrors: true, strict: false });

/** Asserts that `s` is valid against the monitor sample schema. @throws AssertionError with the schema's errors. */
export function validSample(s: unknown): void {
  assert.ok(ajv.validate(MONITOR_SAMPLE_SCHEMA, s), JSON.stringify(ajv.errors));
}
