/*
 * A stand-in libamdhip64 for tests of gpumem's per-release decisions, written for gpumem (no ROCm code in it). It
 * answers as a release does where gpumem's decisions depend on it, per the macros it is built with:
 *   HIP_VER      HIP_VERSION of the release (major * 10^7 + minor * 10^5 + patch)
 *   BATCH        1: exports hipMemcpyBatchAsync (7.1 and later); BATCH_FAIL_IDX 1: the 9-argument form
 *   ATTRS_OK     1: the batch call takes numAttrs > 0 (7.13 and later); 0: hipErrorNotSupported, as 7.1 to 7.12
 * "Device" memory is malloc'd host memory, so copies are memcpy and their bytes can be read back. Every call that a
 * decision concerns is written to the file named by FAKE_HIP_LOG, one line each. Environment at run time:
 *   FAKE_HIP_DEVICES (1), FAKE_HIP_ARCH (gfx942:sramecc+:xnack-), FAKE_HIP_PAGEABLE (unset: attribute refused),
 *   FAKE_HIP_INTEGRATED (0), FAKE_HIP_VMM and FAKE_HIP_POOLS (1: the device attributes say yes).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int hipError_t;
enum { OK = 0, INVALID_VALUE = 1, OOM = 2, NO_DEVICE = 100, INVALID_HANDLE = 400, NOT_SUPPORTED = 801, FAULT = 700 };

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void note(const char *fmt, ...) {
  const char *path = getenv("FAKE_HIP_LOG");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}
static long envl(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}
static int devices(void) { return (int)envl("FAKE_HIP_DEVICES", 1); }
static int current;
static int last_error;

hipError_t hipGetDeviceCount(int *n) { *n = devices(); return *n ? OK : NO_DEVICE; }
hipError_t hipRuntimeGetVersion(int *v) { *v = HIP_VER; return OK; }
hipError_t hipDriverGetVersion(int *v) { *v = HIP_VER; return OK; }
const char *hipGetErrorName(int e) {
  switch (e) {
    case OK: return "hipSuccess";
    case INVALID_VALUE: return "hipErrorInvalidValue";
    case OOM: return "hipErrorOutOfMemory";
    case NO_DEVICE: return "hipErrorNoDevice";
    case NOT_SUPPORTED: return "hipErrorNotSupported";
    case FAULT: return "hipErrorIllegalAddress";
    default: return "hipErrorUnknown";
  }
}
const char *hipGetErrorString(int e) { return hipGetErrorName(e); }
hipError_t hipGetLastError(void) { int e = last_error; last_error = 0; return e; }
hipError_t hipSetDevice(int d) { if (d < 0 || d >= devices()) return INVALID_VALUE; current = d; return OK; }
hipError_t hipDeviceSynchronize(void) { return OK; }
hipError_t hipDeviceGetAttribute(int *v, int attr, int d) {
  if (d < 0 || d >= devices()) return INVALID_VALUE;
  switch (attr) {
    case 65: if (!getenv("FAKE_HIP_PAGEABLE")) return INVALID_VALUE; *v = (int)envl("FAKE_HIP_PAGEABLE", 0); return OK;
    case 16: *v = (int)envl("FAKE_HIP_INTEGRATED", 0); return OK;
    case 88: *v = (int)envl("FAKE_HIP_POOLS", 1); return OK;
#if HIP_VER >= 50300000
    case 89: *v = (int)envl("FAKE_HIP_VMM", 1); return OK;
#endif
    case 63: *v = 304; return OK;
    case 24: case 9: *v = 1; return OK;
    default: return INVALID_VALUE;
  }
}
/* FAKE_HIP_SAME_BUS=1: every device at 0000:10:00.0, as the partitions of one MI300 are. */
hipError_t hipDeviceGetPCIBusId(char *buf, int len, int d) { snprintf(buf, len, "0000:%02x:00.0", 0x10 + (envl("FAKE_HIP_SAME_BUS", 0) ? 0 : d)); return OK; }
hipError_t hipDeviceGetName(char *buf, int len, int d) { snprintf(buf, len, "Fake AMD GPU %d", d); return OK; }
hipError_t hipDeviceGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -1; return OK; }
hipError_t hipMemGetInfo(size_t *free_, size_t *total) { *total = (size_t)1 << 34; *free_ = *total / 2; return OK; }
/* gcnArchName at its offset in each layout (hipDeviceProp_tR0600: 1160; the legacy layout: 396). */
static hipError_t props(char *p, int d, int at) {
  if (d < 0 || d >= devices()) return INVALID_VALUE;
  const char *arch = getenv("FAKE_HIP_ARCH");
  snprintf(p + at, 256, "%s", arch ? arch : "gfx942:sramecc+:xnack-");
  return OK;
}
#if HIP_VER >= 60000000
hipError_t hipGetDevicePropertiesR0600(char *p, int d) { return props(p, d, 1160); }
#endif
hipError_t hipGetDeviceProperties(char *p, int d) { return props(p, d, 396); }

hipError_t hipMalloc(void **p, size_t n) { *p = calloc(1, n); return *p ? OK : OOM; }
hipError_t hipFree(void *p) { free(p); return OK; }
/* Uncached device memory (0x3): 5.3 to 5.5 refuse it with hipErrorInvalidValue, 5.6 takes it. */
hipError_t hipExtMallocWithFlags(void **p, size_t n, unsigned int flags) {
  note("hipExtMallocWithFlags flags=0x%x", flags);
  if (flags == 0x3 && HIP_VER < 50600000) return INVALID_VALUE;
  return hipMalloc(p, n);
}
/* Records the flags and the calling thread's NUMA policy during the call (as hipHostMallocNumaUser reads it). */
hipError_t hipHostMalloc(void **p, size_t n, unsigned int flags) {
  int mode = -1;
  unsigned long mask[16] = {0};
  if (syscall(SYS_get_mempolicy, &mode, mask, 1024, 0, 0) != 0) mode = -2;
  note("hipHostMalloc flags=0x%x policy=%d mask=0x%lx", flags, mode, mask[0]);
  if ((flags & 0xc0000000u) == 0xc0000000u) return INVALID_VALUE;
  if (posix_memalign(p, 4096, n)) return OOM;
  memset(*p, 0, n);
  return OK;
}
hipError_t hipHostFree(void *p) { free(p); return OK; }
hipError_t hipHostGetDevicePointer(void **d, void *h, unsigned int flags) { (void)flags; *d = h; return OK; }
hipError_t hipHostRegister(void *p, size_t n, unsigned int f) { note("hipHostRegister %zu", n); (void)p; (void)f; return OK; }
hipError_t hipHostUnregister(void *p) { (void)p; return OK; }
hipError_t hipMallocManaged(void **p, size_t n, unsigned int f) { (void)f; return hipMalloc(p, n); }
hipError_t hipMemcpy(void *d, const void *s, size_t n, int kind) { (void)kind; memcpy(d, s, n); return OK; }
hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, int kind, void *stream) {
  note("hipMemcpyAsync %zu", n);
  (void)kind; (void)stream; memcpy(d, s, n); return OK;
}
hipError_t hipMemsetAsync(void *p, int v, size_t n, void *s) { (void)s; memset(p, v, n); return OK; }
hipError_t hipMemAdvise(void *p, size_t n, int advice, int dev) { note("hipMemAdvise %d", advice); (void)p; (void)n; (void)dev; return OK; }
hipError_t hipMemRangeGetAttribute(void *data, size_t size, int attr, void *p, size_t n) {
  (void)p; (void)n;
  if (attr != 100 || size < 4) return INVALID_VALUE;
  *(int *)data = (int)envl("FAKE_HIP_COHERENCY", 0);
  return OK;
}
hipError_t hipMemPrefetchAsync(void *p, size_t n, int dev, void *s) { (void)p; (void)n; (void)dev; (void)s; return OK; }

/* Streams are small heap objects, known by address (as hip::isValid checks); the null stream is NULL. */
struct stream { int device; int capturing; };
static void *streams[256];
static int known(void *s) {
  for (int i = 0; i < 256; i++) if (streams[i] == s) return 1;
  return 0;
}
hipError_t hipStreamCreateWithPriority(void **s, unsigned int flags, int prio) {
  struct stream *x = calloc(1, sizeof *x);
  for (int i = 0; i < 256; i++) if (!streams[i]) { streams[i] = x; break; }
  x->device = current;
  note("hipStreamCreateWithPriority flags=%u", flags);
  (void)prio; *s = x; return OK;
}
/* A destroyed stream leaves the table (else a long test run fills its 256 entries and every later stream is refused). */
hipError_t hipStreamDestroy(void *s) {
  for (int i = 0; i < 256; i++) if (streams[i] == s) streams[i] = 0;
  free(s);
  return OK;
}
hipError_t hipStreamSynchronize(void *s) { (void)s; return OK; }
hipError_t hipStreamQuery(void *s) { (void)s; return OK; }
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned int f) { (void)s; (void)e; (void)f; return OK; }
hipError_t hipEventCreateWithFlags(void **e, unsigned int f) { (void)f; *e = malloc(8); return OK; }
hipError_t hipEventDestroy(void *e) { free(e); return OK; }
hipError_t hipEventRecord(void *e, void *s) { (void)e; (void)s; return OK; }
hipError_t hipEventSynchronize(void *e) { (void)e; return OK; }
hipError_t hipEventQuery(void *e) { (void)e; return OK; }
hipError_t hipDeviceCanAccessPeer(int *can, int d, int p) { *can = d != p; return OK; }

/* ROCm 5.2 reads the stream's device before checking for the null stream: here that is logged and refused. */
hipError_t hipMallocAsync(void **p, size_t n, void *stream) {
  note("hipMallocAsync stream=%s", stream ? "created" : "null");
  if (!stream && HIP_VER < 50300000) return FAULT;
  return hipMalloc(p, n);
}
hipError_t hipFreeAsync(void *p, void *s) { (void)s; free(p); return OK; }
hipError_t hipDeviceGetDefaultMemPool(void **pool, int d) { (void)d; *pool = (void *)0x1000; return OK; }
hipError_t hipMemPoolSetAttribute(void *pool, int a, void *v) { (void)pool; (void)a; (void)v; return OK; }
hipError_t hipMemPoolTrimTo(void *pool, size_t k) { (void)pool; (void)k; return OK; }

/* Capture: a host function with null user data is refused while capturing before 5.5, as 5.3 and 5.4 do. */
typedef void (*hostfn)(void *);
hipError_t hipStreamBeginCapture(struct stream *s, int mode) { (void)mode; if (!s) return INVALID_VALUE; s->capturing = 1; return OK; }
hipError_t hipStreamEndCapture(struct stream *s, void **graph) { s->capturing = 0; *graph = malloc(8); return OK; }
hipError_t hipLaunchHostFunc(struct stream *s, hostfn fn, void *user) {
  note("hipLaunchHostFunc user=%s capturing=%d", user ? "set" : "null", s ? s->capturing : 0);
  if (s && s->capturing && !user && HIP_VER < 50500000) return INVALID_VALUE;
  if (!(s && s->capturing)) fn(user);
  return OK;
}

/* The virtual memory API's symbols (gpumem decides from the device attribute, not from these). */
hipError_t hipMemCreate(void **h, size_t n, const void *prop, unsigned long long f) { (void)h; (void)n; (void)prop; (void)f; return NOT_SUPPORTED; }
hipError_t hipMemAddressReserve(void **p, size_t n, size_t a, void *addr, unsigned long long f) { (void)p; (void)n; (void)a; (void)addr; (void)f; return NOT_SUPPORTED; }

#if BATCH
#define BATCH_MAX 8192
/* Copies in order, as 7.1 to 7.12 do inside; a call of more than 8192 copies is the reported fault. */
hipError_t hipMemcpyBatchAsync(void **dsts, void **srcs, size_t *sizes, size_t count, void *attrs, size_t *idx, size_t numAttrs,
#if BATCH_FAIL_IDX
                               size_t *failIdx,
#endif
                               void *stream) {
  (void)attrs; (void)idx;
  note("hipMemcpyBatchAsync count=%zu numAttrs=%zu", count, numAttrs);
#if BATCH_FAIL_IDX
  if (failIdx) *failIdx = SIZE_MAX;
#endif
  if (!stream || !known(stream)) return INVALID_HANDLE;
#if REFUSE_ALL
  return NOT_SUPPORTED;
#endif
  if (!dsts || !srcs || !sizes || !count) return INVALID_VALUE;
  if (numAttrs > 0 && !ATTRS_OK) return NOT_SUPPORTED;
  if (count > BATCH_MAX) return FAULT;
  for (size_t i = 0; i < count; i++) {
    if (!sizes[i]) {
#if BATCH_FAIL_IDX
      if (failIdx) *failIdx = i;
#endif
      return INVALID_VALUE;
    }
    memcpy(dsts[i], srcs[i], sizes[i]);
  }
  return OK;
}
#endif

/* Graphs, enough to end a capture and free what it made. */
hipError_t hipGraphDestroy(void *g) { free(g); return OK; }
hipError_t hipGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) { (void)g; (void)f; *e = malloc(8); return OK; }
hipError_t hipGraphLaunch(void *e, void *s) { (void)e; (void)s; return OK; }
hipError_t hipGraphExecDestroy(void *e) { free(e); return OK; }
