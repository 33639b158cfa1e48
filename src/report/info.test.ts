import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openRuntime } from '../runtime/runtime.js';
import { renderInfo } from '../render/info-text.js';
import { collectInfo } from './info.js';

test('info lists every ordered pair of devices with its link and peer access, in JSON and text', () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 3, deviceBytes: 1 << 20 } });
  const report = collectInfo(rt);
  assert.equal(report.links.length, 6, '3 devices: 6 ordered pairs');
  assert.deepEqual(
    report.links.map((l) => `${l.from}>${l.to}`),
    ['0>1', '0>2', '1>0', '1>2', '2>0', '2>1'],
  );
  for (const l of report.links) {
    assert.equal(l.kind, 'host');
    assert.equal(l.source, 'host');
    assert.equal(l.peerAccess, true, "the host backend's logical devices share one memory: every pair reaches the other");
  }
  const text = renderInfo(report);
  assert.match(text, /links between devices:\n {2}0 -> 1 {2}host {5}peer access yes/);
  assert.equal(text.match(/ -> /g)?.length, 6);
});

test('one device has no links and the text leaves the section out', () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 20 } });
  const report = collectInfo(rt);
  assert.deepEqual(report.links, []);
  assert.doesNotMatch(renderInfo(report), /links between devices/);
});

test("the host backend's device says where its memory figure comes from", () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } });
  const report = collectInfo(rt);
  assert.match(report.devices[0]?.memorySource ?? '', /a slice of this machine's [\d.]+ GiB of memory \(as set; GPUMEM_HOST_DEVICE_BYTES sets it\)/);
  assert.match(renderInfo(report), /1\.0 GiB total, 1\.0 GiB free\n\s+a slice of this machine's/);
});
