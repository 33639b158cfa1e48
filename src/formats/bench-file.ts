/** Reading a gpumem bench JSON from disk, validated against its schema (it is input like any other file). */
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { BadInputError } from '../errors.js';
import { BENCH_JSON_SCHEMA, type BenchReport, type BenchResult } from './bench-schema.js';

/**
 * Reads and validates `gpumem bench --json` output.
 * @throws BadInputError when the file is unreadable, not JSON, or not schema gpumem.bench/1.
 */
export function readBenchReport(file: string): BenchReport {
  let report: BenchReport;
  try {
    report = JSON.parse(readFileSync(file, 'utf8')) as BenchReport;
  } catch (e) {
    throw new BadInputError(`not a readable JSON file: ${(e as Error).message}`, file);
  }
  const ajv = new Ajv({ strict: false });
  if (!ajv.validate(BENCH_JSON_SCHEMA, report)) throw new BadInputError(`not a gpumem bench JSON (schema gpumem.bench/1): ${ajv.errorsText(ajv.errors)}`, file);
  return report;
}

/** The copy-engine rows of one device and direction at the largest size measured, or [] when none. */
export function largestCopyRows(report: BenchReport, device: number, direction: string, hostKind: string): BenchResult[] {
  const rows = report.results.filter(
    (r) =>
      r.device === device &&
      r.test === 'copy' &&
      r.engine === 'copy-engine' &&
      r.direction === direction &&
      (direction === 'DtoH' ? r.dstKind : r.srcKind) === hostKind &&
      r.medianGBps,
  );
  const top = Math.max(0, ...rows.map((r) => r.bytes));
  return rows.filter((r) => r.bytes === top);
}
