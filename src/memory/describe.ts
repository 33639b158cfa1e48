/**
 * Short descriptions of values for error messages: a 64 MiB Float32Array passed where an allocation was expected
 * is named by its type and length, never printed (String() of it is 84 million characters).
 */

/** The type and size of `v`, in a few words ("a Float32Array of 16777216 elements (67108864 bytes)"). */
export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (ArrayBuffer.isView(v)) {
    const name = v.constructor?.name ?? 'typed array';
    const length = (v as { length?: unknown }).length;
    return typeof length === 'number' && !(v instanceof DataView)
      ? `a ${name} of ${length} elements (${v.byteLength} bytes)`
      : `a ${name} of ${v.byteLength} bytes`;
  }
  if (v instanceof ArrayBuffer) return `an ArrayBuffer of ${v.byteLength} bytes`;
  if (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer) return `a SharedArrayBuffer of ${v.byteLength} bytes`;
  if (Array.isArray(v)) return `an array of ${v.length} elements`;
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return `${typeof v} ${String(v)}`;
  if (typeof v === 'string') return `a string of ${v.length} characters`;
  if (typeof v === 'function') return 'a function';
  const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object';
}

/** True for the host buffers rt.upload / rt.download take directly (ArrayBuffer, typed array, DataView). */
export function isJsBuffer(v: unknown): boolean {
  return v instanceof ArrayBuffer || ArrayBuffer.isView(v);
}
