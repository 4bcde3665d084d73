// progress.h: what `mmpack build` tells the user while it runs (stderr).
//
// On a terminal: one line redrawn in place, at most 10 times a second:
//   [##########..........]  1234/5000  24.7%  312.4 samples/s  ETA 0:12  dropped 3
// Otherwise (a log, a pipe): one plain line about every 5 seconds. With quiet: nothing;
// the caller prints its summary itself.
// Not thread-safe: one thread (the writer stage) calls Update and Finish.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace mm::pack {

class Progress {
 public:
  /// `total`: samples expected (0: unknown). `stream`: usually stderr.
  Progress(int64_t total, bool quiet, std::FILE* stream = stderr);

  /// `done`: samples handled (written or dropped), `dropped` of them dropped.
  void Update(int64_t done, int64_t dropped);
  /// Ends the bar's line (terminal) or prints nothing more (plain); idempotent.
  void Finish();
  double ElapsedSeconds() const;

 private:
  void Draw(int64_t done, int64_t dropped, bool final);
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  bool quiet_;
  bool interactive_;
  std::FILE* stream_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  int64_t last_done_ = 0;
  int64_t last_dropped_ = 0;
  bool finished_ = false;
};

}  // namespace mm::pack
