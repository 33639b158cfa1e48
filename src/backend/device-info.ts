/** Helpers for building DeviceInfo records. */

/** Removes keys whose value is undefined, so that JSON and tests see them as absent. */
export function dropUndefined<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}

/**
 * XNACK state of an AMD device: what the architecture name says (gfx90a:xnack+ / xnack-; absent when the target
 * has no XNACK setting) and what HSA_XNACK asks for. `enabled` is the architecture's answer when it gives one.
 */
export function xnackState(
  archName: string | undefined,
  env: string | undefined = process.env.HSA_XNACK,
): {
  arch?: boolean;
  env?: string;
  enabled?: boolean;
} {
  const out: { arch?: boolean; env?: string; enabled?: boolean } = {};
  if (archName?.includes(':xnack+')) out.arch = true;
  else if (archName?.includes(':xnack-')) out.arch = false;
  if (env !== undefined) out.env = env;
  if (out.arch !== undefined) out.enabled = out.arch;
  return out;
}
