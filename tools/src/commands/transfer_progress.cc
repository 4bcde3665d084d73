// transfer_progress.cc: see transfer_progress.h.
#include "commands/transfer_progress.h"

#include <unistd.h>

#include <algorithm>

#include "set/human_bytes.h"

namespace mm::pack {
namespace {

constexpr auto kRateWindow = std::chrono::seconds(10);
constexpr auto kRedraw = std::chrono::milliseconds(100);

std::string HoursMinutes(double seconds) {
  const long long s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  }
  return text;
}

}  // namespace

TransferProgress::TransferProgress(std::string label, std::function<int64_t()> done, int64_t total,
                                   const ProgressOptions& options, std::FILE* stream)
    : label_(std::move(label)),
      done_(std::move(done)),
      options_(options),
      stream_(stream),
      total_(total) {
  if (options_.enabled) thread_ = std::thread([this] { Run(); });
}

TransferProgress::~TransferProgress() { Finish(); }

void TransferProgress::SetTotal(int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  total_ = total;
}

void TransferProgress::SetDeadline(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  deadline_ = deadline;
}

void TransferProgress::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (drawn_) {
    std::fputs("\r\x1b[K", stream_);
    std::fflush(stream_);
  }
}

void TransferProgress::Above(const std::function<void()>& write) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drawn_) {
    std::fputs("\r\x1b[K", stream_);
    std::fflush(stream_);
    drawn_ = false;
  }
  write();
}

std::string TransferProgress::Line(int64_t done, int64_t total, double bytes_per_s, double eta_s) {
  std::string line = HumanBytes(static_cast<double>(done));
  if (total > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, " (%.1f%%)",
                  100.0 * static_cast<double>(done) / static_cast<double>(total));
    line += " of " + HumanBytes(static_cast<double>(total)) + pct;
  }
  line += ", " + HumanBytes(bytes_per_s) + "/s";
  if (total > 0 || eta_s >= 0)
    line += ", ETA " + (eta_s >= 0 ? HoursMinutes(eta_s) : std::string("?"));
  return line;
}

void TransferProgress::Run() {
  const bool interactive = isatty(fileno(stream_)) != 0;
  const auto every = interactive ? std::chrono::duration<double>(kRedraw)
                                 : std::chrono::duration<double>(std::max(0.05, options_.every_s));
  std::unique_lock<std::mutex> lock(mu_);
  auto next = Clock::now() + std::chrono::duration_cast<Clock::duration>(every);
  for (;;) {
    // Sample at least every 100 ms for the rate; draw when `every` has passed.
    const auto wake = std::min(next, Clock::now() + kRedraw);
    wake_.wait_until(lock, wake, [&] { return stop_; });
    if (stop_) return;
    const auto now = Clock::now();
    samples_.emplace_back(now, done_());
    while (samples_.size() > 2 && now - samples_.front().first > kRateWindow) samples_.pop_front();
    if (now >= next) {
      Draw(interactive);
      next = now + std::chrono::duration_cast<Clock::duration>(every);
    }
  }
}

// Called with mu_ held.
void TransferProgress::Draw(bool interactive) {
  if (samples_.empty()) return;
  const auto& [t0, d0] = samples_.front();
  const auto& [t1, d1] = samples_.back();
  const double span = std::chrono::duration<double>(t1 - t0).count();
  const double rate = span > 0 ? static_cast<double>(d1 - d0) / span : 0.0;
  double eta = -1;
  if (deadline_ != Clock::time_point{}) {
    eta = std::max(0.0, std::chrono::duration<double>(deadline_ - t1).count());
  } else if (total_ > 0 && rate > 0) {
    eta = static_cast<double>(std::max<int64_t>(0, total_ - d1)) / rate;
  }
  const std::string line = label_ + ": " + Line(d1, total_, rate, eta);
  if (interactive) {
    std::fprintf(stream_, "\r%s\x1b[K", line.c_str());
    drawn_ = true;
  } else {
    std::fprintf(stream_, "%s\n", line.c_str());
  }
  std::fflush(stream_);
}

}  // namespace mm::pack
