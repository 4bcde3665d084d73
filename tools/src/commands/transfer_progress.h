// transfer_progress.h: what `mmpack upload`, and `verify`, `info` and `bench` on remote sets,
// say on stderr while bytes move (build's sample counts are progress.h).
//
// On a terminal (stderr is a tty): one line redrawn in place at most 10 times a second, erased
// when done (the command's own summary follows):
//   upload: 123.4 MB of 1.2 GB (10.3%), 45.6 MB/s, ETA 0:24
// Otherwise (a log, a pipe): the same line, ended, every `every_s` seconds (5 by default;
// --progress-every), none when the work ends sooner. The rate is that of the last 10 seconds;
// the ETA is what is left at that rate, or the time to a deadline (bench), "?" while unknown.
// Without a total (info: index.json's size is not known before it arrives): bytes and rate.
//
// A thread of its own samples `done` (a callable that returns bytes moved so far; it must be
// thread-safe) and draws. Thread-safe: SetTotal and Finish from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mm::pack {

/// How a command reports progress (--progress-every, -q).
struct ProgressOptions {
  bool enabled = true;
  double every_s = 5.0;  // seconds between lines when stderr is not a terminal
};

class TransferProgress {
 public:
  /// `label`: "upload", "verify"...; `total`: bytes expected (0: unknown).
  TransferProgress(std::string label, std::function<int64_t()> done, int64_t total,
                   const ProgressOptions& options, std::FILE* stream = stderr);
  ~TransferProgress();
  TransferProgress(const TransferProgress&) = delete;
  TransferProgress& operator=(const TransferProgress&) = delete;

  void SetTotal(int64_t total);
  /// The ETA becomes the time left until `deadline` (bench's --seconds).
  void SetDeadline(std::chrono::steady_clock::time_point deadline);
  /// Stops the thread; erases the terminal's line. Idempotent.
  void Finish();
  /// Runs `write` (which prints a line of the command's own, e.g. on stdout) with the terminal's
  /// progress line erased first, so that the line does not land on it; the next draw puts the
  /// progress line back below. Calls are serialised with each other and with drawing.
  void Above(const std::function<void()>& write);

  /// "12.3 MB of 45.6 MB (27.0%), 3.4 MB/s, ETA 0:09" for these figures (a pure function).
  static std::string Line(int64_t done, int64_t total, double bytes_per_s, double eta_s);

 private:
  void Run();
  void Draw(bool interactive);

  using Clock = std::chrono::steady_clock;
  const std::string label_;
  const std::function<int64_t()> done_;
  const ProgressOptions options_;
  std::FILE* const stream_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drawn_ = false;  // a terminal line is showing
  int64_t total_;
  Clock::time_point deadline_{};
  std::deque<std::pair<Clock::time_point, int64_t>> samples_;  // the last 10 s
  std::thread thread_;
};

}  // namespace mm::pack
