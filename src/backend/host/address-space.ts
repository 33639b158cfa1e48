/**
 * The host backend's address space: every allocation is a JS ArrayBuffer given a synthetic address. Addresses are
 * handed out upwards and never reused, with a guard gap between allocations, so a stale or off-by-one address
 * finds no memory instead of someone else's. A removed region is marked and its slot left in place until most
 * slots are marked (then they are swept at once): a transfer that adopts and gives back thousands of buffers in the
 * order it took them pays no shift of the whole list per buffer.
 */
import type { Address } from '../backend.js';

export interface HostRegion {
  address: Address;
  bytes: number;
  buffer: ArrayBuffer;
  /** Which device's capacity it counts against, or undefined for host memory. */
  device: number | undefined;
  kind: 'device' | 'pinned' | 'managed' | 'pageable';
  registered: boolean;
  /** A view of the whole buffer of device, pinned or managed memory, made when a copy first needs it. */
  view: Uint8Array | undefined;
}

const BASE = 0x10_0000_0000; // 64 GiB: well above 0, well below 2^53
const GUARD = 4096;
const ALIGN = 256;

export class HostAddressSpace {
  private next = BASE;
  private bases: number[] = [];
  private regions: Array<HostRegion | undefined> = [];
  /** Slots of removed regions not swept yet. */
  private removed = 0;
  /** The slots found by the last two lookups (indices into `bases`). */
  private hint0 = 0;
  private hint1 = 0;

  /** Places `buffer` at a fresh address. */
  add(buffer: ArrayBuffer, bytes: number, kind: HostRegion['kind'], device: number | undefined): HostRegion {
    const address = this.next;
    this.next = Math.ceil((address + Math.max(bytes, 1) + GUARD) / ALIGN) * ALIGN;
    const region: HostRegion = { address, bytes, buffer, device, kind, registered: false, view: undefined };
    this.bases.push(address);
    this.regions.push(region);
    return region;
  }

  /** The region whose first byte is `address`. */
  at(address: Address): HostRegion | undefined {
    const i = this.index(address);
    return i >= 0 && this.bases[i] === address ? this.regions[i] : undefined;
  }

  /** The region containing [address, address + bytes), if one does (regions do not overlap: only the last below can). */
  containing(address: Address, bytes: number): HostRegion | undefined {
    const i = this.index(address);
    if (i < 0) return undefined;
    const r = this.regions[i];
    return r && address + bytes <= r.address + r.bytes ? r : undefined;
  }

  remove(address: Address): HostRegion | undefined {
    const i = this.index(address);
    const r = i >= 0 && this.bases[i] === address ? this.regions[i] : undefined;
    if (!r) return undefined;
    this.regions[i] = undefined;
    if (++this.removed > 64 && 2 * this.removed > this.regions.length) this.sweep();
    return r;
  }

  /** Drops the slots of removed regions. */
  private sweep(): void {
    const bases: number[] = [];
    const regions: HostRegion[] = [];
    for (let i = 0; i < this.regions.length; i++) {
      const r = this.regions[i];
      if (!r) continue;
      bases.push(this.bases[i]!);
      regions.push(r);
    }
    this.bases = bases;
    this.regions = regions;
    this.removed = 0;
    this.hint0 = this.hint1 = 0;
  }

  /**
   * Index of the last region starting at or below `address`, or -1. The two slots found last, and the slots after
   * them, are tried first: a chunk's copies alternate between its slot and the buffers it adopted in address order,
   * so most lookups end there instead of in a search of every region.
   */
  private index(address: Address): number {
    const b = this.bases;
    const n = b.length;
    for (let k = 0; k < 2; k++) {
      const h = k === 0 ? this.hint0 : this.hint1;
      for (let i = h; i <= h + 1 && i < n; i++) {
        if (b[i]! <= address && (i + 1 === n || b[i + 1]! > address)) {
          if (k === 1) {
            this.hint1 = this.hint0;
            this.hint0 = i;
          } else this.hint0 = i;
          return i;
        }
      }
    }
    const found = this.search(address);
    if (found >= 0) {
      this.hint1 = this.hint0;
      this.hint0 = found;
    }
    return found;
  }

  private search(address: Address): number {
    let lo = 0;
    let hi = this.bases.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.bases[mid]! <= address) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }
}
