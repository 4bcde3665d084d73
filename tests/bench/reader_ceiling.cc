// mm_reader_ceiling: baselines for the reader benchmark (tests/bench/run_reader_bench.sh), on
// the same shards the reader reads.
//
//   mm_reader_ceiling zstd SET_DIR THREADS SECONDS
//     The ceiling: every image chunk's stored bytes (from the reader's own mapping) decompressed
//     with ZSTD_decompressDCtx into one buffer per thread, in file order, in a tight loop; no
//     sampler, no batches, no tokens.
//   mm_reader_ceiling h5dread SET_DIR THREADS SECONDS
//     HDF5's own read path: H5Dread of one [1, H, W, 3] hyperslab per sample, in a shuffled
//     order, through the zstd filter (HDF5_PLUGIN_PATH). HDF5 is not thread-safe in Debian's
//     build, so THREADS is ignored: one thread.
// Prints one JSON object: {"mode", "samples_per_s", "mb_per_s", "cpu_ms_per_sample", ...}.
#include <hdf5.h>
#include <sys/resource.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mm/reader.h"
#include "set/shard_set_impl.h"

namespace {

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s zstd|h5dread SET_DIR THREADS SECONDS\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int threads = std::max(1, std::atoi(argv[3]));
  const double seconds = std::atof(argv[4]);
  auto opened = mm::reader::ShardSet::Open(dir);
  if (!opened.ok()) {
    std::fprintf(stderr, "mm_reader_ceiling: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  const mm::reader::internal::ShardSetImpl* set = &opened.value()->impl();
  const size_t image_bytes = opened.value()->image_bytes();
  using Clock = std::chrono::steady_clock;

  std::atomic<int64_t> samples{0};
  std::atomic<bool> failed{false};
  double cpu0 = 0, elapsed = 0, cpu = 0;
  int used_threads = threads;
  if (mode == "zstd") {
    std::vector<std::string_view> chunks;
    for (size_t k = 0; k < set->num_shards(); ++k) {
      const auto& shard = set->shard(k);
      for (int64_t s = 0; s < shard.num_samples(); ++s) {
        bool compressed = false;
        chunks.push_back(shard.StoredChunk(s, &compressed));
      }
    }
    cpu0 = CpuSeconds();
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
        std::vector<uint8_t> dst(image_bytes);
        size_t i = static_cast<size_t>(t);
        while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
          for (int rep = 0; rep < 16; ++rep, i = (i + threads) % chunks.size()) {
            size_t r = ZSTD_decompressDCtx(dctx.get(), dst.data(), dst.size(), chunks[i].data(),
                                           chunks[i].size());
            if (ZSTD_isError(r)) failed = true;
          }
          samples += 16;
        }
      });
    }
    for (auto& th : pool) th.join();
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    cpu = CpuSeconds() - cpu0;
  } else if (mode == "h5dread") {
    used_threads = 1;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const auto& info = set->info();
    std::vector<hid_t> files, dsets, spaces;
    for (const auto& e : info.shards) {
      hid_t f = H5Fopen((dir + "/" + e.file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
      if (f < 0 || d < 0) {
        std::fprintf(stderr, "mm_reader_ceiling: cannot open %s\n", e.file.c_str());
        return 1;
      }
      files.push_back(f);
      dsets.push_back(d);
      spaces.push_back(H5Dget_space(d));
    }
    std::vector<std::pair<size_t, int64_t>> order;
    for (size_t k = 0; k < info.shards.size(); ++k)
      for (int64_t s = 0; s < info.shards[k].samples; ++s) order.push_back({k, s});
    std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
    hsize_t count[4] = {1, static_cast<hsize_t>(info.image_height),
                        static_cast<hsize_t>(info.image_width), 3};
    hid_t mem = H5Screate_simple(4, count, nullptr);
    std::vector<uint8_t> dst(image_bytes);
    cpu0 = CpuSeconds();
    const auto t0 = Clock::now();
    size_t i = 0;
    while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
      auto [k, s] = order[i++ % order.size()];
      hsize_t start[4] = {static_cast<hsize_t>(s), 0, 0, 0};
      H5Sselect_hyperslab(spaces[k], H5S_SELECT_SET, start, nullptr, count, nullptr);
      if (H5Dread(dsets[k], H5T_NATIVE_UINT8, mem, spaces[k], H5P_DEFAULT, dst.data()) < 0) {
        std::fprintf(stderr, "mm_reader_ceiling: H5Dread failed (HDF5_PLUGIN_PATH?)\n");
        return 1;
      }
      ++samples;
    }
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    cpu = CpuSeconds() - cpu0;
    H5Sclose(mem);
    for (size_t k = 0; k < files.size(); ++k) {
      H5Sclose(spaces[k]);
      H5Dclose(dsets[k]);
      H5Fclose(files[k]);
    }
  } else {
    std::fprintf(stderr, "mm_reader_ceiling: unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (failed) {
    std::fprintf(stderr, "mm_reader_ceiling: a chunk failed to decode\n");
    return 1;
  }
  const double sps = samples / elapsed;
  std::printf(
      "{\"mode\": \"%s\", \"samples_per_s\": %.3f, \"mb_per_s\": %.3f, "
      "\"cpu_ms_per_sample\": %.4f, \"threads\": %d, \"samples\": %lld, \"seconds\": %.3f}\n",
      mode.c_str(), sps, sps * image_bytes / 1e6, cpu * 1e3 / samples.load(), used_threads,
      static_cast<long long>(samples.load()), elapsed);
  return 0;
}
