/** Reading the fields of a config.json: each refusal names the file and the field. */
import { BadInputError } from '../errors.js';

/** A parsed config.json object. */
export type Json = Record<string, unknown>;

/** Reads fields of one config.json, naming the file and the field in every refusal. */
export class Fields {
  /** The fields a family needs that the config left out, each with the default taken (they go to the plan's notes). */
  readonly defaults: string[] = [];

  constructor(
    readonly c: Json,
    readonly file: string,
  ) {}

  /**
   * Like int, but `dflt` when every one of `names` is absent, and the default taken is recorded (`how` says what it
   * is) so that the plan can say it: a config that leaves out a field its family needs is read, not refused, and not
   * silently. @throws BadInputError
   */
  or(names: string | readonly string[], dflt: number, how: string, opts: { min?: number } = {}): number {
    const v = this.int(names, opts);
    if (v !== undefined) return v;
    const first = typeof names === 'string' ? names : names[0];
    this.defaults.push(`${first} is not in the config: took ${dflt} (${how})`);
    return dflt;
  }

  /** @throws BadInputError naming the field */
  fail(message: string): never {
    throw new BadInputError(message, this.file);
  }

  /** The first of `names` present, a whole number of at least `min` (1). @throws BadInputError */
  int(names: string | readonly string[], opts: { min?: number } = {}): number | undefined {
    const min = opts.min ?? 1;
    for (const n of typeof names === 'string' ? [names] : names) {
      const v = this.c[n];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || !Number.isInteger(v)) this.fail(`field "${n}" must be a whole number, got ${JSON.stringify(v)}`);
      if (v < min) this.fail(`field "${n}" must be at least ${min}, got ${v}`);
      if (v > 1e12) this.fail(`field "${n}" is implausibly large: ${v}`);
      return v;
    }
    return undefined;
  }

  /** Like int, but the field must be there. @throws BadInputError */
  need(names: string | readonly string[], opts: { min?: number } = {}): number {
    const v = this.int(names, opts);
    if (v !== undefined) return v;
    const all = typeof names === 'string' ? [names] : names;
    return this.fail(`missing field "${all[0]}"${all.length > 1 ? ` (or ${all.slice(1).join(', ')})` : ''}`);
  }

  /** A boolean field, `dflt` when absent. @throws BadInputError */
  bool(name: string, dflt: boolean): boolean {
    const v = this.c[name];
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'boolean') this.fail(`field "${name}" must be true or false, got ${JSON.stringify(v)}`);
    return v;
  }

  /** A number field (a rate, a fraction, a cap): `dflt` when absent, undefined when null. @throws BadInputError */
  real(name: string, dflt: number | undefined, opts: { min?: number; max?: number } = {}): number | undefined {
    const v = this.c[name];
    if (v === undefined) return dflt;
    if (v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v)) this.fail(`field "${name}" must be a number, got ${JSON.stringify(v)}`);
    if (opts.min !== undefined && v < opts.min) this.fail(`field "${name}" must be at least ${opts.min}, got ${v}`);
    if (opts.max !== undefined && v > opts.max) this.fail(`field "${name}" must be at most ${opts.max}, got ${v}`);
    return v;
  }

  /** A string field, `dflt` when absent. @throws BadInputError */
  str(names: string | readonly string[], dflt: string): string {
    for (const n of typeof names === 'string' ? [names] : names) {
      const v = this.c[n];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'string') this.fail(`field "${n}" must be a string, got ${JSON.stringify(v)}`);
      return v;
    }
    return dflt;
  }

  /** An array field of whole numbers or of strings. @throws BadInputError */
  list<T extends 'number' | 'string'>(name: string, kind: T): Array<T extends 'number' ? number : string> | undefined {
    const v = this.c[name];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v) || v.length > 1e6 || v.some((x) => typeof x !== kind || (kind === 'number' && !Number.isInteger(x))))
      this.fail(`field "${name}" must be a list of ${kind === 'number' ? 'whole numbers' : 'strings'}`);
    return v as Array<T extends 'number' ? number : string>;
  }

  /** A nested object (text_config, vision_config), or undefined. @throws BadInputError */
  object(name: string): Fields | undefined {
    const v = this.c[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v)) this.fail(`field "${name}" must be an object`);
    return new Fields(v as Json, `${this.file} (${name})`);
  }
}
