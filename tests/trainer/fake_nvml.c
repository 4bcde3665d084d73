/* fake_nvml.c: a stand-in for libnvidia-ml.so.1 with NVML's C signatures, for
 * gpu_monitor_test.cc only (no NVIDIA driver on the test machines). One GPU at index 0 with
 * UUID "GPU-fake-0": utilization.gpu 42 %, 3 GiB of 80 GiB in use. Counts the calls, so the
 * test sees the monitor sample in the background. */
#include <string.h>

typedef struct NvmlDeviceOpaque* nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

static int fake_device;
static int initialised;
int fake_nvml_samples;

int nvmlInit_v2(void) { initialised = 1; return 0; }
int nvmlShutdown(void) { initialised = 0; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!initialised) return 1; /* NVML_ERROR_UNINITIALIZED */
  if (index != 0) return 2;   /* NVML_ERROR_INVALID_ARGUMENT */
  *device = (nvmlDevice_t)&fake_device;
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!initialised) return 1;
  if (strcmp(uuid, "GPU-fake-0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *device = (nvmlDevice_t)&fake_device;
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  if (device != (nvmlDevice_t)&fake_device) return 2;
  u->gpu = 42;
  u->memory = 17;
  ++fake_nvml_samples;
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  if (device != (nvmlDevice_t)&fake_device) return 2;
  m->total = 80ull << 30;
  m->used = 3ull << 30;
  m->free = m->total - m->used;
  return 0;
}
const char* nvmlErrorString(int r) {
  switch (r) {
    case 2: return "Invalid Argument";
    case 6: return "Not Found";
    default: return "Unknown Error";
  }
}
