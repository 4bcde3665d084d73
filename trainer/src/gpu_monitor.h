// gpu_monitor.h: the training GPU's utilisation and memory, sampled in the background from
// NVML (the library behind nvidia-smi), loaded at run time with
// dlopen("libnvidia-ml.so.1"): mmtrain has no build-time dependency on it, and where it is
// absent (a CPU machine, a container without the driver's libraries) the monitor says why and
// the metrics simply leave the GPU fields out. No LibTorch header.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace mm::train {

/// GPU samples summed over a span (a log window, or the whole run). samples == 0: none.
struct GpuStats {
  int64_t samples = 0;
  double util_sum_pct = 0;      // sum of nvmlUtilization_t.gpu: % of the sample period in which
                                // a kernel ran (nvidia-smi's utilization.gpu)
  double mem_used_max_mib = 0;  // largest nvmlMemory_t.used seen, MiB (every process's)
  double mem_total_mib = 0;     // the device's memory, MiB

  double util_mean_pct() const { return samples > 0 ? util_sum_pct / samples : 0; }
  void Add(const GpuStats& o);
};

/// Samples one GPU every `period_ms` on its own thread. Thread-safe.
class GpuMonitor {
 public:
  /// `cuda_index`: the process's CUDA device index; mapped to NVML's device through
  /// CUDA_VISIBLE_DEVICES (indices or GPU-/MIG- UUIDs) when it is set. `library`: the NVML
  /// library to open (tests may name another). Never throws: an absent library, symbol or
  /// device leaves available() false with the reason in unavailable_reason().
  explicit GpuMonitor(int cuda_index, int period_ms = 200,
                      const std::string& library = "libnvidia-ml.so.1");
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  /// The samples since the last call (or since construction), and starts a new span.
  GpuStats TakeWindow();

  struct Nvml;  // the dlopen'ed library's functions

 private:
  void SampleLoop(int period_ms);

  std::unique_ptr<Nvml> nvml_;
  bool available_ = false;
  std::string reason_;
  std::mutex mu_;
  GpuStats window_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mm::train
