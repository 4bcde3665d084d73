// bench.cc: `mmpack bench OUT`: reader throughput through the real Loader (shuffled, prefetching,
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
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include "commands/commands.h"
#include "mm/internal/set_files.h"
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

// Peak anonymous RSS while the loader runs: /proc/self/status sampled every 5 ms.
class RssWatcher {
 public:
  RssWatcher() : peak_kb_(ProcStatusKb("RssAnon")), thread_([this] { Watch(); }) {}
  ~RssWatcher() { Stop(); }
  void Stop() {
    done_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  double peak_mb() const { return peak_kb_.load() / 1024.0; }

 private:
  void Watch() {
    while (!done_.load()) {
      int64_t kb = ProcStatusKb("RssAnon");
      if (kb > peak_kb_.load()) peak_kb_.store(kb);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::atomic<bool> done_{false};
  std::atomic<int64_t> peak_kb_;
  std::thread thread_;
};

// What one run measured (bench.cc's header comment says how).
struct Figures {
  int64_t samples = 0;
  double seconds = 0, cpu_seconds = 0;
  double anon_open_mb = 0, peak_anon_mb = 0, hwm_mb = 0;
};

// Reads batches through `loader` for `seconds` after one warm-up batch (threads started,
// first buffers allocated), epoch after epoch. Errors: the loader's.
Status ReadFor(mm::reader::Loader* loader, double seconds, Figures* f) {
  int64_t epoch = 0;
  auto next = [&](int64_t* samples) -> Status {
    for (;;) {
      MM_ASSIGN_OR_RETURN(mm::reader::BatchPtr batch, loader->Next());
      if (batch) {
        *samples += batch->size;
        return Status::OK();
      }
      loader->StartEpoch(++epoch);
    }
  };
  int64_t warm = 0;
  MM_RETURN_NOT_OK(next(&warm));
  using Clock = std::chrono::steady_clock;
  const double cpu0 = CpuSeconds();
  const auto t0 = Clock::now();
  while (f->seconds < seconds) {
    MM_RETURN_NOT_OK(next(&f->samples));
    f->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  f->cpu_seconds = CpuSeconds() - cpu0;
  return Status::OK();
}

// Rounded to 3 decimals, as the text output prints them.
double Round3(double v) { return std::round(v * 1000.0) / 1000.0; }

std::string FiguresJson(const BenchOptions& options, const mm::reader::ShardSet& set,
                        const Figures& f) {
  const double sps = f.samples / f.seconds;
  nlohmann::ordered_json j;
  j["samples_per_s"] = Round3(sps);
  j["mb_per_s"] = Round3(sps * static_cast<double>(set.image_bytes()) / 1e6);
  j["cpu_ms_per_sample"] = Round3(f.cpu_seconds * 1e3 / f.samples);
  j["peak_anon_rss_mb"] = Round3(f.peak_anon_mb);
  j["anon_rss_open_mb"] = Round3(f.anon_open_mb);
  j["vm_hwm_mb"] = Round3(f.hwm_mb);
  j["samples"] = f.samples;
  j["seconds"] = Round3(f.seconds);
  j["threads"] = options.threads;
  j["prefetch"] = options.prefetch;
  if (set.remote()) {  // what the cache did: bytes fetched against the set's bytes
    const mm::reader::CacheStats c = set.cache_stats();
    j["downloads"] = c.downloads;
    j["downloaded_bytes"] = c.downloaded_bytes;
    j["cache_hits"] = c.hits;
    j["cache_peak_bytes"] = c.peak_bytes;
  }
  j["batch_size"] = options.batch_size;
  j["image_bytes"] = set.image_bytes();
  j["set_samples"] = set.num_samples();
  return j.dump() + "\n";
}

std::string FiguresText(const BenchOptions& options, const mm::reader::ShardSet& set,
                        const Figures& f) {
  const double sps = f.samples / f.seconds;
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  o << "read " << f.samples << " samples in " << f.seconds << " s (" << options.threads
    << " threads, prefetch " << options.prefetch << ", batch " << options.batch_size << ", set of "
    << set.num_samples() << " samples)\n"
    << "  samples/s           " << sps << "\n"
    << "  MB/s (decoded)      " << sps * static_cast<double>(set.image_bytes()) / 1e6 << "\n"
    << "  CPU ms per sample   " << f.cpu_seconds * 1e3 / f.samples << "\n"
    << "  peak anon RSS (MiB) " << f.peak_anon_mb << "  (after open: " << f.anon_open_mb << ")\n"
    << "  VmHWM (MiB)         " << f.hwm_mb << "  (includes mapped shard pages)\n";
  if (set.remote()) {
    const mm::reader::CacheStats c = set.cache_stats();
    o << "  downloads           " << c.downloads << " shards, " << c.downloaded_bytes << " bytes ("
      << c.hits << " cache hits, cache peak " << c.peak_bytes << " bytes)\n";
  }
  return o.str();
}

}  // namespace

Status RunBench(const BenchOptions& options, std::ostream& out) {
  if (options.threads < 0 || options.batch_size < 1 || !(options.seconds > 0)) {
    return Status::InvalidArgument("bench: batch size and seconds must be positive, threads >= 0");
  }
  mm::reader::OpenOptions open;
  open.remote = options.remote;
  // By default each shard's HDF5 metadata is parsed in a bounded child (safe on a damaged
  // shard; one fork per shard, which a remote set pays while it reads); --trusted opens them in
  // this process, as mmtrain and mmpack.Loader do.
  open.isolate_hdf5 = !options.trusted;
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(options.dir, open));
  Figures f;
  f.anon_open_mb = ProcStatusKb("RssAnon") / 1024.0;
  mm::reader::LoaderOptions lo;
  lo.batch_size = options.batch_size;
  lo.num_threads = options.threads;
  lo.prefetch_batches = options.prefetch;
  lo.shuffle = true;
  lo.shuffle_mode = options.shuffle;
  lo.shuffle_window = options.shuffle_window;
  lo.drop_last = false;
  lo.seed = 1;
  SetLoaderView(options.crop, options.size, options.interpolation, &lo);
  MM_ASSIGN_OR_RETURN(auto loader, mm::reader::Loader::Create(set, lo));
  lo.num_threads = loader->options().num_threads;  // 0 resolved
  if (!loader->notice().empty()) std::cerr << "mmpack bench: " << loader->notice() << "\n";
  RssWatcher watcher;
  // A remote set: what the cache downloads meanwhile, the ETA the end of --seconds.
  const int64_t received_before = mm::reader::internal::RemoteBytesReceived();
  ProgressOptions progress = options.progress;
  progress.enabled = progress.enabled && set->remote();
  TransferProgress bar(
      "bench: downloaded",
      [received_before] { return mm::reader::internal::RemoteBytesReceived() - received_before; },
      0, progress);
  bar.SetDeadline(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(options.seconds)));
  Status read = ReadFor(loader.get(), options.seconds, &f);
  bar.Finish();
  watcher.Stop();
  loader.reset();
  MM_RETURN_NOT_OK(read);
  if (f.samples == 0 || f.seconds <= 0) return Status::Internal("bench: no samples read");
  f.peak_anon_mb = watcher.peak_mb();
  f.hwm_mb = ProcStatusKb("VmHWM") / 1024.0;
  BenchOptions ran = options;
  ran.threads = lo.num_threads;
  out << (options.json ? FiguresJson(ran, *set, f) : FiguresText(ran, *set, f));
  return Status::OK();
}

}  // namespace mm::pack
