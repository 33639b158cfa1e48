/**
 * libc's copy and file calls for the host copier's threads and the transfer engine's file paths, bound through
 * koffi: memcpy, pread and pwrite on raw addresses (no JS buffer in between, no 2 GiB limit), posix_fadvise, and
 * mmap + mincore to tell how much of a file range sits in the page cache. Each thread binds its own copy on first
 * use; every call is synchronous and meant for a worker thread (or for a few pages on the main thread).
 */
import { createRequire } from 'node:module';

type Koffi = typeof import('koffi').default;
type Fn = (...args: unknown[]) => unknown;

/** The libc calls, as plain functions over numbers. */
export interface LibcIo {
  memcpy(dst: number, src: number, bytes: number): void;
  /** Bytes read (0 at the end of the file), or -errno. Retries EINTR. */
  pread(fd: number, buf: number, bytes: number, offset: number): number;
  /** Bytes written, or -errno. Retries EINTR. */
  pwrite(fd: number, buf: number, bytes: number, offset: number): number;
  /** 0 or an errno (posix_fadvise returns the error itself). */
  fadvise(fd: number, offset: number, bytes: number, advice: number): number;
  /** Of a sample of the pages of [offset, offset + bytes), how many are in the page cache; undefined if mmap or mincore fail. */
  residentPages(fd: number, offset: number, bytes: number): { resident: number; pages: number } | undefined;
}

/** posix_fadvise advice values (fcntl.h on Linux). */
export const FADV = { SEQUENTIAL: 2, WILLNEED: 3, DONTNEED: 4 } as const;

const EINTR = 4;
let io: LibcIo | undefined;

/** libc's I/O calls for this thread. @throws Error where libc.so.6 cannot be loaded (not Linux). */
export function libcIo(): LibcIo {
  if (io) return io;
  const koffi = createRequire(import.meta.url)('koffi') as Koffi;
  const libc = koffi.load('libc.so.6');
  const memcpy = libc.func('void *memcpy(uintptr_t dst, uintptr_t src, size_t n)') as Fn;
  const pread = libc.func('long pread(int fd, uintptr_t buf, size_t n, int64_t off)') as Fn;
  const pwrite = libc.func('long pwrite(int fd, uintptr_t buf, size_t n, int64_t off)') as Fn;
  const fadvise = libc.func('int posix_fadvise(int fd, int64_t off, int64_t len, int advice)') as Fn;
  const mmap = libc.func('uintptr_t mmap(uintptr_t addr, size_t len, int prot, int flags, int fd, int64_t off)') as Fn;
  const munmap = libc.func('int munmap(uintptr_t addr, size_t len)') as Fn;
  const mincore = libc.func('int mincore(uintptr_t addr, size_t len, _Out_ uint8_t *vec)') as Fn;
  const retry = (call: () => number): number => {
    for (;;) {
      const r = call();
      if (r >= 0) return r;
      const e = koffi.errno();
      if (e !== EINTR) return -e;
    }
  };
  const PAGE = 4096;
  io = {
    memcpy: (d, s, n) => void memcpy(d, s, n),
    pread: (fd, buf, n, off) => retry(() => pread(fd, buf, n, off) as number),
    pwrite: (fd, buf, n, off) => retry(() => pwrite(fd, buf, n, off) as number),
    fadvise: (fd, off, n, advice) => fadvise(fd, off, n, advice) as number,
    residentPages: (fd, offset, bytes) => {
      const start = Math.floor(offset / PAGE) * PAGE;
      const len = offset + bytes - start;
      if (len <= 0) return { resident: 0, pages: 0 };
      const p = mmap(0, len, 1 /* PROT_READ */, 1 /* MAP_SHARED */, fd, start) as number;
      if (p === 2 ** 64 - 1 || p === 0 || p >= Number.MAX_SAFE_INTEGER) return undefined;
      try {
        // A sample of at most 256 pages spread over the range: mincore over a whole large file costs milliseconds.
        const pages = Math.ceil(len / PAGE);
        const samples = Math.min(pages, 256);
        const vec = new Uint8Array(1);
        let resident = 0;
        for (let i = 0; i < samples; i++) {
          const page = Math.floor((i * pages) / samples);
          if ((mincore(p + page * PAGE, PAGE, vec) as number) !== 0) return undefined;
          resident += vec[0]! & 1;
        }
        return { resident, pages: samples };
      } finally {
        munmap(p, len);
      }
    },
  };
  return io;
}

/** The address of a JS ArrayBuffer's bytes (for tests and the main thread's small copies). */
export function bufferAddress(buffer: ArrayBuffer): number {
  const koffi = createRequire(import.meta.url)('koffi') as Koffi;
  return Number(koffi.address(buffer));
}

/**
 * The runtime's pinned allocator (cudaHostAlloc or hipHostMalloc: `int f(void **p, size_t bytes, unsigned flags)`),
 * bound on this thread from the library the backend loaded, so that a copier thread can pin memory while the JS
 * thread goes on. Answers the address, or the runtime's status.
 */
export function hostAllocator(library: string, symbol: string): (bytes: number, flags: number) => { address: number } | { status: number } {
  if (!/^(cudaHostAlloc|hipHostMalloc)$/.test(symbol)) throw new Error(`not a pinned allocator: ${symbol}`);
  const koffi = createRequire(import.meta.url)('koffi') as Koffi;
  const f = koffi.load(library).func(`int ${symbol}(_Out_ uintptr_t *p, size_t n, unsigned int flags)`) as Fn;
  return (bytes, flags) => {
    const out: number[] = [0];
    const status = f(out, bytes, flags) as number;
    return status === 0 ? { address: out[0]! } : { status };
  };
}
