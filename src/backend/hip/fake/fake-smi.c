/*
 * Stand-in management libraries for gpumem's tests, written for gpumem: libamd_smi (AMD SMI, from ROCm 6.1) and
 * librocm_smi64 (ROCm SMI), built from this one file with -DAMDSMI or -DRSMI. They describe one GPU at PCI
 * 0000:10:00.0, split into FAKE_SMI_PARTITIONS partitions (1), as an MI300X in CPX mode is: AMD SMI lists each
 * partition with its own VRAM (FAKE_SMI_VRAM_GIB / partitions) and NUMA node (partition % FAKE_SMI_NODES), and GTT
 * (FAKE_SMI_GTT_GIB); ROCm SMI gives every partition the whole GPU's VRAM, the figure the issue calls unreliable.
 * -DENUM=1 adds amdsmi_get_gpu_enumeration_info (AMD SMI of ROCm 6.4 and later).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static long envl(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}
static uint32_t parts(void) { return (uint32_t)envl("FAKE_SMI_PARTITIONS", 1); }
static const uint64_t GIB = 1ull << 30;

#ifdef AMDSMI
/* Processor handles are addresses of this array's elements; the socket is its start. */
static char procs[64];
int amdsmi_init(uint64_t flags) { return flags & 2 ? 0 : 2; }
int amdsmi_shut_down(void) { return 0; }
int amdsmi_status_code_to_string(int s, const char **text) { *text = s ? "AMDSMI_STATUS_NOT_SUPPORTED" : "AMDSMI_STATUS_SUCCESS"; return 0; }
int amdsmi_get_socket_handles(uint32_t *count, void **sockets) {
  if (sockets && *count >= 1) sockets[0] = procs;
  *count = 1;
  return 0;
}
int amdsmi_get_processor_handles(void *socket, uint32_t *count, void **handles) {
  if (socket != procs) return 2;
  uint32_t n = parts();
  if (handles) for (uint32_t i = 0; i < n && i < *count; i++) handles[i] = procs + i;
  *count = n;
  return 0;
}
static long index_of(void *h) { long i = (char *)h - procs; return i >= 0 && i < (long)parts() ? i : -1; }
int amdsmi_get_gpu_memory_total(void *h, int type, uint64_t *total) {
  if (index_of(h) < 0) return 2;
  if (type == 0) *total = (uint64_t)envl("FAKE_SMI_VRAM_GIB", 192) * GIB / parts();
  else if (type == 2) *total = (uint64_t)envl("FAKE_SMI_GTT_GIB", 0) * GIB;
  else return 2;
  return 0;
}
int amdsmi_get_gpu_memory_usage(void *h, int type, uint64_t *used) {
  uint64_t total;
  if (amdsmi_get_gpu_memory_total(h, type, &total)) return 2;
  *used = total / 4;
  return 0;
}
/* amdsmi_bdf_t: function 3 bits, device 5, bus 8, domain 48: every partition shows the GPU's own address. */
int amdsmi_get_gpu_device_bdf(void *h, uint64_t *bdf) { if (index_of(h) < 0) return 2; *bdf = (uint64_t)0x10 << 8; return 0; }
int amdsmi_get_gpu_kfd_info(void *h, uint32_t *info) {
  long i = index_of(h);
  if (i < 0) return 2;
  memset(info, 0, 64);
  info[2] = 100 + (uint32_t)i; /* node_id */
  info[3] = (uint32_t)i;       /* current_partition_id */
  return 0;
}
int amdsmi_topo_get_numa_node_number(void *h, uint32_t *node) {
  long i = index_of(h);
  if (i < 0) return 2;
  *node = (uint32_t)(i % envl("FAKE_SMI_NODES", 1));
  return 0;
}
int amdsmi_get_gpu_device_uuid(void *h, unsigned int *len, char *uuid) {
  long i = index_of(h);
  if (i < 0 || *len < 38) return 41;
  snprintf(uuid, *len, "fake-uuid-%ld", i);
  return 0;
}
int amdsmi_get_gpu_activity(void *h, uint32_t *usage) { if (index_of(h) < 0) return 2; memset(usage, 0, 64); usage[0] = 37; return 0; }
#if ENUM
/* HIP numbers the partitions in reverse here, so that a match by PCI address alone would be wrong. */
int amdsmi_get_gpu_enumeration_info(void *h, uint32_t *info) {
  long i = index_of(h);
  if (i < 0) return 2;
  memset(info, 0, 272);
  info[3] = parts() - 1 - (uint32_t)i; /* hip_id */
  return 0;
}
#endif
#endif

#ifdef RSMI
int rsmi_init(uint64_t flags) { (void)flags; return 0; }
int rsmi_shut_down(void) { return 0; }
int rsmi_status_string(int s, const char **text) { *text = s ? "RSMI_STATUS_NOT_SUPPORTED" : "RSMI_STATUS_SUCCESS"; return 0; }
int rsmi_num_monitor_devices(uint32_t *n) { *n = parts(); return 0; }
/* ROCm SMI's BDF id: domain << 32 | partition << 28 | bus << 8 | device << 3 | function. */
int rsmi_dev_pci_id_get(uint32_t d, uint64_t *id) { if (d >= parts()) return 2; *id = ((uint64_t)d << 28) | (0x10 << 8); return 0; }
int rsmi_dev_memory_total_get(uint32_t d, int type, uint64_t *total) {
  if (d >= parts() || type != 0) return 2;
  *total = (uint64_t)envl("FAKE_SMI_VRAM_GIB", 192) * GIB;
  return 0;
}
int rsmi_dev_memory_usage_get(uint32_t d, int type, uint64_t *used) {
  if (d >= parts() || type != 0) return 2;
  *used = GIB;
  return 0;
}
#endif
