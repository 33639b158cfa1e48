/**
 * Staging memory placed on a NUMA node: the mapping's policy as the kernel reports it in /proc/self/numa_maps
 * (this machine has node 0; the GPU machines used so far have one node too, so local against remote is not measured).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { GpuError } from '../../errors.js';
import { numaNodes } from '../sysfs.js';
import { mapOnNode, unmapNodeMemory } from './numa-memory.js';

const skip = !existsSync('/proc/self/numa_maps') ? 'no /proc/self/numa_maps here' : numaNodes().length === 0 ? 'no NUMA node listed in sysfs' : false;

test('mapOnNode binds the pages to the node (MPOL_BIND, as numa_maps shows) and faults them in', { skip }, () => {
  const node = numaNodes()[0]!;
  const bytes = 4 * 2 ** 20;
  const address = mapOnNode(bytes, node, 'test');
  try {
    const line = readFileSync('/proc/self/numa_maps', 'utf8')
      .split('\n')
      .find((l) => l.startsWith(address.toString(16)));
    assert.ok(line, `the mapping at 0x${address.toString(16)} is listed`);
    assert.match(line, new RegExp(`bind:${node}\\b`));
    assert.match(line, new RegExp(`N${node}=\\d+`), 'its pages are resident on the node');
  } finally {
    unmapNodeMemory(address, bytes);
  }
});

test('mapOnNode refuses a node the machine does not have, with the errno', { skip }, () => {
  assert.throws(
    () => mapOnNode(4096, 1000, 'test'),
    (e: unknown) => e instanceof GpuError && /mbind of 4096 bytes to NUMA node 1000 failed \(errno \d+\)/.test(e.message),
  );
});
