// GPU utilisation in the metrics (trainer/src/gpu_monitor.h): where NVML is absent (every
// machine without NVIDIA's driver, this one included) the monitor says why and the records
// leave the GPU fields out; where it is there, the fields appear. The present path runs against
// fake_nvml.c (NVML's C signatures, canned figures), the only NVML on a machine without a GPU.
#include "gpu_monitor.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "metrics.h"

namespace {

using mm::train::GpuMonitor;
using mm::train::GpuStats;

/// Samples for `ms` milliseconds at 10 ms.
GpuStats SampleFor(GpuMonitor& m, int ms) {
  m.TakeWindow();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return m.TakeWindow();
}

TEST(GpuMonitor, AbsentNvmlLeavesItUnavailableWithTheReason) {
  GpuMonitor m(0, 10, "libnvidia-ml-not-here.so.1");
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.unavailable_reason().find("NVML not loaded: libnvidia-ml-not-here.so.1"),
            std::string::npos)
      << m.unavailable_reason();
  EXPECT_EQ(SampleFor(m, 30).samples, 0);
}

TEST(GpuMonitor, TheRealLibraryNameIsTriedWithoutFailing) {
  // Whatever this machine has: no driver -> unavailable with a reason; a GPU -> samples.
  GpuMonitor m(0, 10);
  if (m.available()) {
    EXPECT_GT(SampleFor(m, 100).samples, 0);
  } else {
    EXPECT_FALSE(m.unavailable_reason().empty());
  }
}

TEST(GpuMonitor, SamplesUtilisationAndMemoryInTheBackground) {
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  GpuMonitor m(0, 10, MM_FAKE_NVML);
  ASSERT_TRUE(m.available()) << m.unavailable_reason();
  const GpuStats w = SampleFor(m, 150);
  EXPECT_GE(w.samples, 3);
  EXPECT_DOUBLE_EQ(w.util_mean_pct(), 42.0);
  EXPECT_DOUBLE_EQ(w.mem_used_max_mib, 3 * 1024.0);
  EXPECT_DOUBLE_EQ(w.mem_total_mib, 80 * 1024.0);
}

TEST(GpuMonitor, MapsCudaVisibleDevicesToNvmlsDevice) {
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-0", 1);
  {
    GpuMonitor m(0, 10, MM_FAKE_NVML);
    EXPECT_TRUE(m.available()) << m.unavailable_reason();
  }
  ::setenv("CUDA_VISIBLE_DEVICES", "3,0", 1);  // CUDA's device 0 is NVML's 3: none here
  {
    GpuMonitor m(0, 10, MM_FAKE_NVML);
    EXPECT_FALSE(m.available());
    EXPECT_EQ(m.unavailable_reason(), "NVML device '3': Invalid Argument");
    GpuMonitor m1(1, 10, MM_FAKE_NVML);  // CUDA's device 1 is NVML's 0
    EXPECT_TRUE(m1.available()) << m1.unavailable_reason();
    GpuMonitor m2(2, 10, MM_FAKE_NVML);
    EXPECT_EQ(m2.unavailable_reason(), "CUDA device 2 is not in CUDA_VISIBLE_DEVICES=3,0");
  }
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST(TrainRecord, HasGpuFieldsOnlyWhenTheWindowHasGpuSamples) {
  mm::train::MetricsWindow w;
  mm::train::StepStats s;
  s.samples = 8, s.time_s = 1, s.loss = 2;
  w.Add(s);
  auto without = mm::train::TrainRecord(10, w, s, 0, 1.0);
  for (const char* key : {"gpu_util_pct", "gpu_mem_used_mib", "gpu_mem_total_mib"}) {
    EXPECT_FALSE(without.contains(key)) << without.dump();
  }
  EXPECT_EQ(without["skipped_steps"], 0);
  w.gpu.samples = 4, w.gpu.util_sum_pct = 4 * 97.5, w.gpu.mem_used_max_mib = 2048,
  w.gpu.mem_total_mib = 81920;
  s.skipped = true;
  w.Add(s);
  auto with = mm::train::TrainRecord(11, w, s, 0, 32768.0);
  EXPECT_DOUBLE_EQ(with["gpu_util_pct"].get<double>(), 97.5);
  EXPECT_DOUBLE_EQ(with["gpu_mem_used_mib"].get<double>(), 2048);
  EXPECT_DOUBLE_EQ(with["gpu_mem_total_mib"].get<double>(), 81920);
  EXPECT_EQ(with["skipped_steps"], 1);
  EXPECT_EQ(with["loss_scale"], 32768.0);
}

}  // namespace
