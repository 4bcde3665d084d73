// mm_jpeg_crop_bench: the reader's JPEG load-time transform (reader/src/transforms:
// CropResizeJpeg: smallest DCT scale, cropped and skipped scanlines, Lanczos-3) on JPEG files
// held in memory, on T threads, as the loader's decode threads run it per sample; for the
// FFCV comparison of issue 10 (transforms_bench.py), until the reader reads JPEG shard sets.
// It does not include the loader's batching or token copy (a few microseconds a sample, see
// `mmpack bench` on raw sets).
//
//   mm_jpeg_crop_bench FILES_TXT rrc|center THREADS SECONDS SIZE
// FILES_TXT: one JPEG path a line. Prints one JSON object: samples_per_s, cpu_ms_per_sample,
// scale_histogram (how many samples decoded at each scale_num/8).
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sampler.h"
#include "transforms/crop_resize.h"
#include "transforms/crop_window.h"
#include "transforms/jpeg_region.h"

using namespace mm::reader::internal;

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Image {
  std::string bytes;
  int w = 0, h = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: mm_jpeg_crop_bench FILES_TXT rrc|center THREADS SECONDS SIZE\n");
    return 2;
  }
  const bool rrc = std::string(argv[2]) == "rrc";
  const int threads = std::stoi(argv[3]);
  const double seconds = std::stod(argv[4]);
  const int size = std::stoi(argv[5]);
  std::vector<Image> images;
  std::ifstream list(argv[1]);
  for (std::string path; std::getline(list, path);) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    Image im;
    im.bytes = ss.str();
    if (!JpegDimensions(reinterpret_cast<const uint8_t*>(im.bytes.data()), im.bytes.size(), &im.w,
                        &im.h)
             .ok()) {
      std::fprintf(stderr, "mm_jpeg_crop_bench: %s: not a JPEG\n", path.c_str());
      return 1;
    }
    images.push_back(std::move(im));
  }
  if (images.empty()) return std::fprintf(stderr, "mm_jpeg_crop_bench: no images\n"), 1;
  std::atomic<int64_t> next{0}, done{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int64_t>> scales(9);
  const int64_t n = static_cast<int64_t>(images.size());
  auto work = [&] {
    std::vector<uint8_t> batch(static_cast<size_t>(32) * size * size * 3);
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t k = next.fetch_add(32);
      for (int j = 0; j < 32; ++j) {
        const int64_t pos = (k + j) % n;
        const int64_t epoch = (k + j) / n;
        const int64_t i = static_cast<int64_t>(Permutation(n, 1, epoch)(pos));  // random order
        const Image& im = images[i];
        CounterRng rng(SampleHash(1, epoch, i, kCropSalt));
        const CropWindow win = rrc ? RandomResizedCrop(im.w, im.h, {}, &rng)
                                   : CenterCrop(im.w, im.h, size, size, 224.0 / 256);
        scales[JpegScaleFor(win, size, size)].fetch_add(1, std::memory_order_relaxed);
        if (!CropResizeJpeg(reinterpret_cast<const uint8_t*>(im.bytes.data()), im.bytes.size(),
                            im.w, im.h, win, size, size, false,
                            batch.data() + static_cast<size_t>(j) * size * size * 3)
                 .ok()) {
          failed.fetch_add(1);
        }
      }
      done.fetch_add(32);
    }
  };
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  const double samples = static_cast<double>(done.load());
  std::printf(
      "{\"samples_per_s\": %.1f, \"cpu_ms_per_sample\": %.4f, \"failed\": %lld, "
      "\"images\": %lld, \"scale_histogram\": [",
      samples / wall, 1000.0 * cpu / samples, static_cast<long long>(failed.load()),
      static_cast<long long>(n));
  for (int s = 1; s <= 8; ++s) {
    std::printf("%s%lld", s > 1 ? ", " : "", static_cast<long long>(scales[s].load()));
  }
  std::printf("]}\n");
  return failed.load() == 0 ? 0 : 1;
}
