// progress.cc: see progress.h.
#include "build/progress.h"

#include <unistd.h>

#include <string>

namespace mm::pack {

Progress::Progress(int64_t total, bool quiet, std::FILE* stream)
    : total_(total),
      quiet_(quiet),
      interactive_(isatty(fileno(stream)) != 0),
      stream_(stream),
      start_(Clock::now()),
      last_draw_(start_) {}

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::Update(int64_t done, int64_t dropped) {
  last_done_ = done;
  last_dropped_ = dropped;
  if (quiet_ || finished_) return;
  auto now = Clock::now();
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since < (interactive_ ? 0.1 : 5.0)) return;
  last_draw_ = now;
  Draw(done, dropped, false);
}

void Progress::Draw(int64_t done, int64_t dropped, bool final) {
  double elapsed = ElapsedSeconds();
  double rate = elapsed > 0 ? done / elapsed : 0;
  std::string eta = "?";
  if (total_ > 0 && rate > 0) {
    int64_t left = static_cast<int64_t>((total_ - done) / rate + 0.5);
    char buf[32];
    if (left >= 3600) {
      std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(left / 3600),
                    static_cast<long long>(left / 60 % 60), static_cast<long long>(left % 60));
    } else {
      std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(left / 60),
                    static_cast<long long>(left % 60));
    }
    eta = buf;
  }
  double pct = total_ > 0 ? 100.0 * done / total_ : 0;
  if (interactive_) {
    constexpr int kWidth = 24;
    int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : 0;
    std::string bar(filled, '#');
    bar.append(kWidth - filled, '.');
    std::fprintf(stream_, "\r[%s] %lld/%lld %5.1f%% %7.1f samples/s ETA %s dropped %lld\x1b[K",
                 bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_), pct,
                 rate, eta.c_str(), static_cast<long long>(dropped));
    if (final) std::fputc('\n', stream_);
  } else {
    std::fprintf(stream_,
                 "mmpack build: %lld/%lld samples (%.1f%%), %.1f samples/s, ETA %s, "
                 "dropped %lld\n",
                 static_cast<long long>(done), static_cast<long long>(total_), pct, rate,
                 eta.c_str(), static_cast<long long>(dropped));
  }
  std::fflush(stream_);
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (quiet_) return;
  if (interactive_) Draw(last_done_, last_dropped_, true);
}

}  // namespace mm::pack
