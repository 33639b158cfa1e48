/**
 * Kernel arguments packed for cuLaunchKernel / hipModuleLaunchKernel: each argument's bytes in its own slot, and the
 * pointer array the launch reads pointing at exactly those slots (checked by reading the memory back through libc,
 * as the driver reads it).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { koffiModule, packKernelArgs } from './ffi.js';

test('packKernelArgs: a pointer per argument, each pointing at that argument bytes as C lays them out', () => {
  const koffi = koffiModule();
  const packed = packKernelArgs([
    { type: 'ptr', value: 0x7f00_1234_5678 },
    { type: 'u64', value: 2n ** 63n + 5n },
    { type: 'i64', value: -3 },
    { type: 'u32', value: 0xfffffffe },
    { type: 'i32', value: -7 },
    { type: 'f32', value: 1.5 },
    { type: 'f64', value: Math.PI },
  ]);
  assert.equal(packed.byteLength, 7 * 8);
  const pointers = new BigUint64Array(packed.buffer, packed.byteOffset, 7);
  // What the driver sees: read each argument through its pointer, from native memory.
  const memcpy = koffi.load('libc.so.6').func('void *memcpy(_Out_ uint8_t *dst, uintptr_t src, size_t n)');
  const at = (i: number, n: number): DataView => {
    const out = new Uint8Array(n);
    memcpy(out, pointers[i]!, n);
    return new DataView(out.buffer);
  };
  assert.equal(at(0, 8).getBigUint64(0, true), 0x7f00_1234_5678n);
  assert.equal(at(1, 8).getBigUint64(0, true), 2n ** 63n + 5n);
  assert.equal(at(2, 8).getBigInt64(0, true), -3n);
  assert.equal(at(3, 4).getUint32(0, true), 0xfffffffe);
  assert.equal(at(4, 4).getInt32(0, true), -7);
  assert.equal(at(5, 4).getFloat32(0, true), 1.5);
  assert.equal(at(6, 8).getFloat64(0, true), Math.PI);
  // The view handed to the launch is the pointer array itself, after the seven slots: koffi passes its address.
  assert.equal(packed.byteOffset, 56);
  assert.equal(pointers[0], koffi.address(packed.buffer));
  assert.equal(packKernelArgs([]).byteLength, 8, 'no arguments: a valid, empty parameter array');
});
