// `mmpack bench OUT`: reader throughput through the real Loader (shuffled, prefetching,
// decode threads), as a training process would see it.
//
// What is measured, over `seconds` of wall time after one warm-up batch:
//   samples_per_s      samples delivered by Loader::Next per second;
//   mb_per_s           decoded image bytes delivered per second (10^6 bytes);
//   cpu_ms_per_sample  process CPU time (getrusage RUSAGE_SELF: user + system, all threads)
//                      per sample;
//   peak_anon_rss_mb   the highest RssAnon of /proc/self/status (anonymous resident memory: heap,
//                      batch buffers, stacks; not the page cache behind the mapped shards),
//                      sampled every 5 ms while the loader runs (MiB).
// Also anon_rss_open_mb (RssAnon after opening the set, before the loader) and vm_hwm_mb
// (peak resident memory including file-backed pages of the mapping).
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include "commands/commands.h"
#include "mm/reader.h"

namespace mm::pack {
namespace {

// A field of /proc/self/status in kB ("RssAnon", "VmHWM"); -1 when absent.
int64_t ProcStatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

Status RunBench(const BenchOptions& options, std::ostream& out) {
  if (options.threads < 1 || options.batch_size < 1 || !(options.seconds > 0)) {
    return Status::InvalidArgument("bench: threads, batch size and seconds must be positive");
  }
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(options.dir));
  const double anon_open_mb = ProcStatusKb("RssAnon") / 1024.0;
  mm::reader::LoaderOptions lo;
  lo.batch_size = options.batch_size;
  lo.num_threads = options.threads;
  lo.shuffle = true;
  lo.drop_last = false;
  lo.seed = 1;
  MM_ASSIGN_OR_RETURN(auto loader, mm::reader::Loader::Create(set, lo));

  std::atomic<bool> done{false};
  std::atomic<int64_t> peak_anon_kb{ProcStatusKb("RssAnon")};
  std::thread watcher([&] {
    while (!done.load()) {
      int64_t kb = ProcStatusKb("RssAnon");
      if (kb > peak_anon_kb.load()) peak_anon_kb.store(kb);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  int64_t epoch = 0;
  Status failure;
  auto next = [&](int64_t* samples) -> bool {
    for (;;) {
      auto r = loader->Next();
      if (!r.ok()) {
        failure = r.status();
        return false;
      }
      if (r.value()) {
        *samples += r.value()->size;
        return true;
      }
      loader->StartEpoch(++epoch);
    }
  };
  int64_t warm = 0;
  next(&warm);  // threads started, first buffers allocated
  using Clock = std::chrono::steady_clock;
  const double cpu0 = CpuSeconds();
  const auto t0 = Clock::now();
  int64_t samples = 0;
  double elapsed = 0;
  while (failure.ok() && elapsed < options.seconds) {
    if (!next(&samples)) break;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double cpu = CpuSeconds() - cpu0;
  done.store(true);
  watcher.join();
  loader.reset();
  MM_RETURN_NOT_OK(failure);
  if (samples == 0 || elapsed <= 0) return Status::Internal("bench: no samples read");

  const double sps = samples / elapsed;
  const double mbps = sps * static_cast<double>(set->image_bytes()) / 1e6;
  const double cpu_ms = cpu * 1e3 / samples;
  const double peak_mb = peak_anon_kb.load() / 1024.0;
  const double hwm_mb = ProcStatusKb("VmHWM") / 1024.0;
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  if (options.json) {
    o << "{\"samples_per_s\": " << sps << ", \"mb_per_s\": " << mbps
      << ", \"cpu_ms_per_sample\": " << cpu_ms << ", \"peak_anon_rss_mb\": " << peak_mb
      << ", \"anon_rss_open_mb\": " << anon_open_mb << ", \"vm_hwm_mb\": " << hwm_mb
      << ", \"samples\": " << samples << ", \"seconds\": " << elapsed
      << ", \"threads\": " << options.threads << ", \"batch_size\": " << options.batch_size
      << ", \"image_bytes\": " << set->image_bytes() << ", \"set_samples\": " << set->num_samples()
      << "}\n";
  } else {
    o << "read " << samples << " samples in " << elapsed << " s (" << options.threads
      << " threads, batch " << options.batch_size << ", set of " << set->num_samples()
      << " samples)\n"
      << "  samples/s           " << sps << "\n"
      << "  MB/s (decoded)      " << mbps << "\n"
      << "  CPU ms per sample   " << cpu_ms << "\n"
      << "  peak anon RSS (MiB) " << peak_mb << "  (after open: " << anon_open_mb << ")\n"
      << "  VmHWM (MiB)         " << hwm_mb << "  (includes mapped shard pages)\n";
  }
  out << o.str();
  return Status::OK();
}

}  // namespace mm::pack
