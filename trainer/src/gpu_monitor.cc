#include "gpu_monitor.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <type_traits>
#include <vector>

namespace mm::train {

namespace {

// The few NVML declarations used (nvml.h, NVIDIA's NVML API reference): an opaque device
// handle, nvmlReturn_t (0 = NVML_SUCCESS) and two plain structs.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlUtilization {
  unsigned int gpu;     // % of the last sample period with a kernel running
  unsigned int memory;  // % of it with device memory being read or written
};
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};

struct LibraryCloser {
  void operator()(void* handle) const {
    if (handle) ::dlclose(handle);
  }
};

}  // namespace

struct GpuMonitor::Nvml {
  std::unique_ptr<void, LibraryCloser> library;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  bool initialised = false;
  NvmlDevice device = nullptr;

  ~Nvml() {
    if (initialised) shutdown();
  }
  std::string Error(NvmlReturn r) const {
    return error_string ? error_string(r) : "NVML error " + std::to_string(r);
  }
};

void GpuStats::Add(const GpuStats& o) {
  samples += o.samples;
  util_sum_pct += o.util_sum_pct;
  mem_used_max_mib = std::max(mem_used_max_mib, o.mem_used_max_mib);
  if (o.mem_total_mib > 0) mem_total_mib = o.mem_total_mib;
}

GpuMonitor::GpuMonitor(int cuda_index, int period_ms, const std::string& library)
    : nvml_(std::make_unique<Nvml>()) {
  Nvml& n = *nvml_;
  n.library.reset(::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!n.library) {
    const char* e = ::dlerror();
    reason_ = "NVML not loaded: " + std::string(e ? e : library);
    return;
  }
  auto sym = [&](const char* name, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(n.library.get(), name));
    if (!fn && reason_.empty()) reason_ = library + " has no " + name;
  };
  sym("nvmlInit_v2", n.init);
  sym("nvmlShutdown", n.shutdown);
  sym("nvmlDeviceGetHandleByIndex_v2", n.by_index);
  sym("nvmlDeviceGetHandleByUUID", n.by_uuid);
  sym("nvmlDeviceGetUtilizationRates", n.utilization);
  sym("nvmlDeviceGetMemoryInfo", n.memory);
  sym("nvmlErrorString", n.error_string);
  if (!reason_.empty()) return;
  if (NvmlReturn r = n.init(); r != kNvmlSuccess) {
    reason_ = "nvmlInit: " + n.Error(r);
    return;
  }
  n.initialised = true;
  // CUDA_VISIBLE_DEVICES renumbers the devices CUDA shows; NVML sees them all.
  std::string nvml_id = std::to_string(cuda_index);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::vector<std::string> ids;
    std::stringstream list(visible);
    for (std::string id; std::getline(list, id, ',');) ids.push_back(id);
    if (cuda_index < 0 || cuda_index >= static_cast<int>(ids.size())) {
      reason_ = "CUDA device " + std::to_string(cuda_index) +
                " is not in CUDA_VISIBLE_DEVICES=" + visible;
      return;
    }
    nvml_id = ids[cuda_index];
  }
  NvmlReturn r;
  if (nvml_id.rfind("GPU-", 0) == 0 || nvml_id.rfind("MIG-", 0) == 0) {
    r = n.by_uuid(nvml_id.c_str(), &n.device);
  } else {
    char* end = nullptr;
    const long index = std::strtol(nvml_id.c_str(), &end, 10);
    r = (end == nvml_id.c_str() || *end != '\0' || index < 0)
            ? 2  // NVML_ERROR_INVALID_ARGUMENT
            : n.by_index(static_cast<unsigned int>(index), &n.device);
  }
  if (r != kNvmlSuccess) {
    reason_ = "NVML device '" + nvml_id + "': " + n.Error(r);
    return;
  }
  available_ = true;
  thread_ = std::thread([this, period_ms] { SampleLoop(period_ms); });
}

GpuMonitor::~GpuMonitor() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void GpuMonitor::SampleLoop(int period_ms) {
  const Nvml& n = *nvml_;
  while (!stop_) {
    NvmlUtilization u{};
    NvmlMemory m{};
    if (n.utilization(n.device, &u) == kNvmlSuccess && n.memory(n.device, &m) == kNvmlSuccess) {
      std::lock_guard<std::mutex> lock(mu_);
      window_.samples += 1;
      window_.util_sum_pct += u.gpu;
      window_.mem_used_max_mib = std::max(window_.mem_used_max_mib, m.used / 1048576.0);
      window_.mem_total_mib = m.total / 1048576.0;
    }
    // Sleep in short slices so that the destructor does not wait a whole period.
    for (int slept = 0; slept < period_ms && !stop_; slept += 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, period_ms - slept)));
    }
  }
}

GpuStats GpuMonitor::TakeWindow() {
  std::lock_guard<std::mutex> lock(mu_);
  GpuStats w = window_;
  window_ = GpuStats{};
  return w;
}

}  // namespace mm::train
