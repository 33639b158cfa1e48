/**
 * Live allocations of a runtime, by address range, so that a raw address can be traced to the allocation that
 * contains it (and one that belongs to nobody is refused before it reaches the driver).
 */
import type { Allocation } from './allocation.js';

export class AllocationRegistry {
  private readonly starts: number[] = [];
  private readonly entries: Allocation[] = [];

  get size(): number {
    return this.entries.length;
  }

  add(a: Allocation, address = a.address): void {
    const i = this.upper(address);
    this.starts.splice(i, 0, address);
    this.entries.splice(i, 0, a);
  }

  delete(a: Allocation): void {
    for (const address of new Set([a.address, a.deviceAddress ?? a.address])) {
      let i = this.upper(address) - 1;
      while (i >= 0 && this.starts[i] === address) {
        if (this.entries[i] === a) {
          this.starts.splice(i, 1);
          this.entries.splice(i, 1);
          break;
        }
        i--;
      }
    }
  }

  /** The allocation containing `address` and the offset of the address in it. */
  find(address: number): { allocation: Allocation; offset: number } | undefined {
    const i = this.upper(address) - 1;
    if (i < 0) return undefined;
    const a = this.entries[i]!;
    const start = this.starts[i]!;
    return address < start + a.bytes ? { allocation: a, offset: address - start } : undefined;
  }

  all(): readonly Allocation[] {
    return [...new Set(this.entries)];
  }

  /** First index whose start is greater than `address`. */
  private upper(address: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid]! <= address) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
