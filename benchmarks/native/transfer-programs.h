// The native counterparts of gpumem's program-shaped transfer rows (included by transfer.cu): many separate host
// arrays staged to the device, the first staged upload of a process, and a file read into the device through a
// pinned ring (pread on T threads, buffered and O_DIRECT) or through cuFile (GPUDirect Storage, where built with it).
// Timed as transfer.cu times everything: host clock from the first call until the data has arrived.
#pragma once
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <string>
#ifdef HAVE_CUFILE
#include <cufile.h>
#endif

// One piece of a list: host source, device destination, bytes.
struct Piece {
  const char* src;
  char* dst;
  size_t n;
};

// One chunk's copies: one cudaMemcpyBatchAsync for several where the runtime has it (its one attribute names where
// the sources and destinations live), else one cudaMemcpyAsync each.
static void chunk_copies(std::vector<void*>& dsts, std::vector<void*>& srcs, std::vector<size_t>& sizes, bool up, cudaStream_t s) {
#if CUDART_VERSION >= 12080
  if (sizes.size() > 1) {
    cudaMemcpyAttributes attr;
    std::memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.srcLocHint.type = up ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    attr.dstLocHint.type = up ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    size_t first = 0;
#if CUDART_VERSION >= 13000
    CHECK(cudaMemcpyBatchAsync(dsts.data(), (const void**)srcs.data(), sizes.data(), sizes.size(), &attr, &first, 1, s));
#else
    size_t fail = 0;
    CHECK(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), sizes.size(), &attr, &first, 1, &fail, s));
#endif
    return;
  }
#endif
  for (size_t p = 0; p < sizes.size(); p++) CHECK(cudaMemcpyAsync(dsts[p], srcs[p], sizes[p], up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
}

// Every piece of `list` through the ring without draining it: pieces are packed into chunks back to back, a chunk is
// filled by the threads (each copying whole pieces or parts of one), then landed with chunk_copies.
static void staged_list(const std::vector<Piece>& list, Ring& r, int threads, cudaStream_t s) {
  size_t i = 0, off = 0;  // the next piece, and how much of it is already staged
  size_t k = 0;
  std::vector<void*> dsts, srcs;
  std::vector<size_t> sizes;
  while (i < list.size()) {
    int slot = k % r.depth;
    if (k >= (size_t)r.depth) CHECK(cudaEventSynchronize(r.ev[slot]));
    char* base = r.pinned + slot * r.chunk;
    size_t used = 0;
    dsts.clear();
    srcs.clear();
    sizes.clear();
    std::vector<Piece> fill;
    while (i < list.size() && used < r.chunk) {
      size_t take = std::min(list[i].n - off, r.chunk - used);
      fill.push_back({list[i].src + off, base + used, take});
      dsts.push_back(list[i].dst + off);
      srcs.push_back(base + used);
      sizes.push_back(take);
      used += take;
      off += take;
      if (off == list[i].n) {
        i++;
        off = 0;
      }
    }
    // The chunk's pieces cut into parts of about chunk / threads (at least 64 KiB), shared out over the threads.
    size_t per = std::max<size_t>(64 << 10, (used / threads + 4095) / 4096 * 4096);
    std::vector<Piece> parts;
    for (const Piece& f : fill)
      for (size_t o = 0; o < f.n; o += per) parts.push_back({f.src + o, (char*)f.dst + o, std::min(per, f.n - o)});
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (size_t p = 0; p < parts.size(); p++) std::memcpy(parts[p].dst, parts[p].src, parts[p].n);
    chunk_copies(dsts, srcs, sizes, true, s);
    CHECK(cudaEventRecord(r.ev[slot], s));
    k++;
  }
  CHECK(cudaStreamSynchronize(s));
}

// The download side of staged_list: every piece of `list` (here `src` is device memory, `dst` the host array) from
// the device through the ring, packed into chunks the same way; each chunk's copies (chunk_copies, device to host)
// enqueued up to the ring's depth ahead, and the chunk scattered into the arrays by the threads once it has arrived.
static void staged_list_down(const std::vector<Piece>& list, Ring& r, int threads, cudaStream_t s) {
  struct Planned {
    std::vector<Piece> scatter;  // slot -> host array parts
    std::vector<void*> dsts, srcs;
    std::vector<size_t> sizes;
    size_t used = 0;
  };
  std::vector<Planned> chunks;
  size_t i = 0, off = 0;
  while (i < list.size()) {
    char* base = r.pinned + (chunks.size() % r.depth) * r.chunk;
    Planned c;
    std::vector<Piece> whole;
    while (i < list.size() && c.used < r.chunk) {
      size_t take = std::min(list[i].n - off, r.chunk - c.used);
      whole.push_back({base + c.used, list[i].dst + off, take});
      c.dsts.push_back(base + c.used);
      c.srcs.push_back((void*)(list[i].src + off));
      c.sizes.push_back(take);
      c.used += take;
      off += take;
      if (off == list[i].n) {
        i++;
        off = 0;
      }
    }
    size_t per = std::max<size_t>(64 << 10, (c.used / threads + 4095) / 4096 * 4096);
    for (const Piece& f : whole)
      for (size_t o = 0; o < f.n; o += per) c.scatter.push_back({f.src + o, f.dst + o, std::min(per, f.n - o)});
    chunks.push_back(std::move(c));
  }
  size_t issued = 0;
  for (size_t k = 0; k < chunks.size(); k++) {
    while (issued < chunks.size() && issued < k + r.depth) {
      Planned& c = chunks[issued];
      chunk_copies(c.dsts, c.srcs, c.sizes, false, s);
      CHECK(cudaEventRecord(r.ev[issued % r.depth], s));
      issued++;
    }
    CHECK(cudaEventSynchronize(r.ev[k % r.depth]));
    const std::vector<Piece>& parts = chunks[k].scatter;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (size_t p = 0; p < parts.size(); p++) std::memcpy(parts[p].dst, parts[p].src, parts[p].n);
  }
}

// `count` separate host arrays of `each` bytes to one device buffer and back: each staged and waited for in turn
// (where `each_rows`), and all through the ring at once, up and down.
static void many_rows(char* dev, size_t count, size_t each, int threads, int reps, cudaStream_t s, bool each_rows = true) {
  std::vector<char*> arrays(count);
  for (auto& a : arrays) {
    a = (char*)std::malloc(each);
    std::memset(a, 3, each);
  }
  std::vector<Piece> list, back;
  for (size_t i = 0; i < count; i++) list.push_back({arrays[i], dev + i * each, each});
  for (size_t i = 0; i < count; i++) back.push_back({dev + i * each, arrays[i], each});
  Ring ring(8 << 20, 8);
  char row[96];
  for (int r = 0; each_rows && r <= reps; r++) {
    double t = seconds();
    for (size_t i = 0; i < count; i++) staged_upload(dev + i * each, arrays[i], each, ring, threads, s);
    std::snprintf(row, sizeof row, "HtoD-many pageable staged-each %zu", each);
    if (r) emit(row, count * each, seconds() - t, threads, ring.chunk);
  }
  for (int r = 0; r <= reps; r++) {
    double t = seconds();
    staged_list(list, ring, threads, s);
    std::snprintf(row, sizeof row, "HtoD-many pageable staged-list %zu", each);
    if (r) emit(row, count * each, seconds() - t, threads, ring.chunk);
  }
  for (int r = 0; r <= reps; r++) {
    double t = seconds();
    staged_list_down(back, ring, threads, s);
    std::snprintf(row, sizeof row, "DtoH-many pageable staged-list %zu", each);
    if (r) emit(row, count * each, seconds() - t, threads, ring.chunk);
  }
  for (auto a : arrays) std::free(a);
}

// The first staged upload of this process: the ring's pinning and the thread team's start are counted.
static void first_row(char* dev, const char* host, size_t n, int threads, cudaStream_t s) {
  double t = seconds();
  Ring ring(8 << 20, 8);
  staged_upload(dev, host, n, ring, threads, s);
  emit("HtoD-first pageable staged", n, seconds() - t, threads, ring.chunk);
}

// pread of [off, off + n) into `dst` on T threads (4 KiB-aligned parts); false at a short read or an error.
static bool parallel_pread(int fd, char* dst, size_t n, off_t off, int threads) {
  size_t per = ((n + threads - 1) / threads + 4095) / 4096 * 4096;
  int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static, 1) reduction(+ : bad)
  for (int t = 0; t < threads; t++) {
    size_t o = (size_t)t * per;
    size_t done = 0, len = o >= n ? 0 : std::min(per, n - o);
    while (done < len) {
      ssize_t got = pread(fd, dst + o + done, len - done, off + o + done);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        bad++;
        break;
      }
      done += got;
    }
  }
  return bad == 0;
}

// A file through the ring: chunk k read by the threads while the copy engine lands chunk k - 1.
static void file_staged(int fd, char* dev, size_t n, Ring& r, int threads, cudaStream_t s) {
  size_t chunks = (n + r.chunk - 1) / r.chunk;
  for (size_t k = 0; k < chunks; k++) {
    int slot = k % r.depth;
    size_t off = k * r.chunk, len = off + r.chunk > n ? n - off : r.chunk;
    if (k >= (size_t)r.depth) CHECK(cudaEventSynchronize(r.ev[slot]));
    size_t aligned = (len + 4095) / 4096 * 4096;  // O_DIRECT reads whole blocks; the file's end stops them
    if (!parallel_pread(fd, r.pinned + slot * r.chunk, aligned, off, threads) && off + aligned <= n) {
      std::fprintf(stderr, "pread failed: %s\n", std::strerror(errno));
      std::exit(1);
    }
    CHECK(cudaMemcpyAsync(dev + off, r.pinned + slot * r.chunk, len, cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(r.ev[slot], s));
  }
  CHECK(cudaStreamSynchronize(s));
}

static void drop_cache(const std::string& path, size_t n) {
  int fd = open(path.c_str(), O_RDONLY);
  posix_fadvise(fd, 0, n, POSIX_FADV_DONTNEED);
  close(fd);
}

// File rows: the file written once, then read to the device from the page cache and cold, buffered and O_DIRECT,
// through the ring; and with cuFile where this program was built with it.
static void file_rows(char* dev, const char* host, size_t n, int threads, int reps, cudaStream_t s) {
  const char* dir = std::getenv("GPUMEM_BENCH_DIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/gpumem-native-file.bin";
  int w = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (size_t o = 0; o < n;) o += write(w, host + o, std::min<size_t>(64 << 20, n - o));
  fdatasync(w);
  close(w);
  Ring ring(8 << 20, 8);
  struct Way {
    const char* row;
    int flags;
    bool cold;
  };
  for (Way way : {Way{"FtoD file-cached pread-staged", O_RDONLY, false}, Way{"FtoD file-cold pread-staged", O_RDONLY, true},
                  Way{"FtoD file-cold odirect-staged", O_RDONLY | O_DIRECT, true}}) {
    int fd = open(path.c_str(), way.flags);
    if (fd < 0) continue;  // the file system refuses O_DIRECT
    for (int r = 0; r <= reps; r++) {
      if (way.cold) drop_cache(path, n);
      double t = seconds();
      file_staged(fd, dev, n, ring, threads, s);
      if (r) emit(way.row, n, seconds() - t, threads, ring.chunk);
    }
    close(fd);
  }
#ifdef HAVE_CUFILE
  CUfileError_t st = cuFileDriverOpen();
  if (st.err == CU_FILE_SUCCESS) {
    for (bool cold : {false, true}) {
      int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
      if (fd < 0) break;
      CUfileDescr_t d;
      std::memset(&d, 0, sizeof d);
      d.handle.fd = fd;
      d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
      CUfileHandle_t fh;
      CUfileError_t reg = cuFileHandleRegister(&fh, &d);
      if (reg.err != CU_FILE_SUCCESS) std::fprintf(stderr, "cuFileHandleRegister failed (%d): cuFile rows left out\n", reg.err);
      if (reg.err == CU_FILE_SUCCESS) {
        for (int r = 0; r <= reps; r++) {
          if (cold) drop_cache(path, n);
          double t = seconds();
          ssize_t got = cuFileRead(fh, dev, n, 0, 0);
          if (got != (ssize_t)n) std::fprintf(stderr, "cuFileRead answered %zd\n", got);
          if (r && got == (ssize_t)n) emit(cold ? "FtoD file-cold cufile" : "FtoD file-cached cufile", n, seconds() - t);
        }
        cuFileHandleDeregister(fh);
      }
      close(fd);
    }
    cuFileDriverClose();
  } else {
    std::fprintf(stderr, "cuFileDriverOpen failed (%d): cuFile rows left out\n", st.err);
  }
#endif
  unlink(path.c_str());
}
