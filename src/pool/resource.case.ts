/**
 * The resource conformance suite: the same cases for every source and adaptor. A rejected call must leave the
 * resource exactly as it was (checked through `observe`, which reads whatever state the resource exposes).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ErrorCode, GpuError } from '../errors.js';
import type { MemoryResource } from './memory-resource.js';
import type { ResourceBase } from './resource-base.js';

export interface ResourceUnderTest {
  resource: MemoryResource & ResourceBase;
  /** A JSON-able view of the resource's state (statistics, counters); equal before and after a rejected call. */
  observe(): unknown;
  /** Largest single allocation the case may make. */
  maxBytes?: number;
  /** Disposes what the resource's memory comes from (its runtime); absent for a simulated device, which has none. */
  closeRuntime?(): void;
  cleanup?(): void;
}

const is = (code: string) => (e: unknown) => e instanceof GpuError && e.code === code;

export function resourceConformance(label: string, make: () => ResourceUnderTest): void {
  const withR = (name: string, fn: (r: ResourceUnderTest, t: TestContext) => void | Promise<void>): void => {
    test(`${label}: ${name}`, async (t) => {
      const r = make();
      try {
        await fn(r, t);
      } finally {
        r.resource[Symbol.dispose]();
        r.cleanup?.();
      }
    });
  };

  withR('allocates distinct, aligned, non-overlapping ranges and takes them back', (r) => {
    const sizes = [1, 255, 256, 257, 4096, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20];
    const got = sizes.map((n) => ({ n, a: r.resource.allocate(n) }));
    for (const { a } of got) assert.equal(a % 256, 0, `address 0x${a.toString(16)} is 256-byte aligned`);
    const sorted = [...got].sort((x, y) => x.a - y.a);
    for (let i = 1; i < sorted.length; i++) assert.ok(sorted[i - 1]!.a + sorted[i - 1]!.n <= sorted[i]!.a, 'ranges do not overlap');
    for (const { n, a } of got.reverse()) r.resource.deallocate(a, n);
    const again = r.resource.allocate(4096);
    r.resource.deallocate(again, 4096);
  });

  withR('rejects bad sizes, double frees, foreign addresses and wrong sizes, and stays as it was', (r) => {
    const a = r.resource.allocate(1000);
    const before = JSON.stringify(r.observe());
    const rejected: Array<[() => unknown, string]> = [
      [() => r.resource.allocate(0), ErrorCode.INVALID_SIZE],
      [() => r.resource.allocate(-1), ErrorCode.INVALID_SIZE],
      [() => r.resource.allocate(2.5), ErrorCode.INVALID_SIZE],
      [() => r.resource.allocate(Number.NaN), ErrorCode.INVALID_SIZE],
      [() => r.resource.allocate(64, { alignment: 3 }), ErrorCode.INVALID_ARGUMENT],
      [() => r.resource.deallocate(a + 256, 1000), ErrorCode.FOREIGN_ADDRESS],
      [() => r.resource.deallocate(12345, 1000), ErrorCode.FOREIGN_ADDRESS],
      [() => r.resource.deallocate(a, 999), ErrorCode.INVALID_ARGUMENT],
    ];
    for (const [fn, code] of rejected) {
      assert.throws(fn, is(code), String(fn));
      assert.equal(JSON.stringify(r.observe()), before, `state unchanged after ${String(fn)}`);
    }
    r.resource.deallocate(a, 1000);
    const afterFree = JSON.stringify(r.observe());
    assert.throws(() => r.resource.deallocate(a, 1000), is(ErrorCode.DOUBLE_FREE));
    assert.equal(JSON.stringify(r.observe()), afterFree, 'state unchanged after a double free');
  });

  withR('typed allocations are disposable and carry the bytes', (r) => {
    if (!r.resource.backend) {
      // a simulated device has addresses but no memory behind them: refused as unsupported, and nothing allocated
      const before = JSON.stringify(r.observe());
      assert.throws(() => r.resource.alloc(4096), is(ErrorCode.UNSUPPORTED));
      assert.equal(JSON.stringify(r.observe()), before, 'state unchanged after the refusal');
      return;
    }
    const t = r.resource.alloc(4096);
    assert.equal(t.bytes, 4096);
    assert.equal(t.kind, r.resource.kind);
    if (t.hostVisible) {
      t.view().fill(9);
      assert.equal(t.view()[4095], 9);
      assert.throws(() => t.view(4090, 10), is(ErrorCode.OUT_OF_BOUNDS));
    }
    t[Symbol.dispose]();
    t[Symbol.dispose]();
    assert.throws(() => t.free(), is(ErrorCode.DOUBLE_FREE));
    assert.throws(() => t.view(), is(ErrorCode.DISPOSED));
  });

  withR('refuses with DISPOSED once its runtime was disposed, and its own dispose is then a no-op', (r, t) => {
    if (!r.closeRuntime) return t.skip('a simulated device: no runtime frees its memory under it');
    // A block cached by a pool, a live one, and a typed allocation: the runtime's disposal freed all three.
    const cached = r.resource.allocate(4096);
    r.resource.deallocate(cached, 4096);
    const live = r.resource.allocate(8192);
    const typed = r.resource.alloc(4096);
    r.closeRuntime();
    assert.throws(() => r.resource.allocate(4096), is(ErrorCode.DISPOSED), 'no cached block is handed out');
    assert.throws(() => r.resource.allocate(1 << 20), is(ErrorCode.DISPOSED));
    assert.throws(() => r.resource.deallocate(live, 8192), is(ErrorCode.DISPOSED));
    assert.throws(() => r.resource.alloc(64), is(ErrorCode.DISPOSED));
    typed[Symbol.dispose]();
    assert.equal(typed.disposed, true, 'the typed allocation is marked freed, as the runtime marked its own');
    r.resource[Symbol.dispose]();
    r.resource[Symbol.dispose]();
    assert.throws(() => r.resource.allocate(4096), is(ErrorCode.DISPOSED));
  });

  withR('is unusable once disposed', (r) => {
    const a = r.resource.allocate(512);
    r.resource[Symbol.dispose]();
    assert.throws(() => r.resource.allocate(512), is(ErrorCode.DISPOSED));
    assert.throws(() => r.resource.deallocate(a, 512), is(ErrorCode.DISPOSED));
  });
}
