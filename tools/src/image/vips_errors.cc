// vips_errors.cc: see vips_errors.h. The only reader of vips_error_buffer().
#include "image/vips_errors.h"

#include <vips/vips.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "base/c_handles.h"
#include "text/ascii.h"

namespace mm::pack {
namespace {

// libvips' error buffer is process-wide: a failing call appends its lines, and until this
// thread reads them, another thread's failure may add its own or take (and clear) ours. So
// ProcessImage holds this gate shared for each decode, and a decode that failed in libvips is
// run again holding it exclusively, when no other libvips call is running: the buffer then
// holds that file's lines only. Writers go first, so a rerun waits only for the decodes
// already running. Failures are rare; each costs one more decode.
class VipsErrorGate {
 public:
  void lock_shared() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !writing_ && writers_waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--readers_ == 0) changed_.notify_all();
  }
  void lock() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++writers_waiting_;
    changed_.wait(lock, [&] { return !writing_ && readers_ == 0; });
    --writers_waiting_;
    writing_ = true;
  }
  void unlock() {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int readers_ = 0, writers_waiting_ = 0;
  bool writing_ = false;
};
VipsErrorGate g_vips_error_gate;
thread_local bool t_failed_in_vips = false;  // set by DecodeFail: the detail is libvips' text

std::once_flag g_vips_once;
bool g_vips_ok = false;
std::string g_vips_error;

}  // namespace

// Takes (and clears) libvips' error text and returns one line of it for report.json: the
// first that names this file's format, else the first. Only trusted when the caller holds
// g_vips_error_gate exclusively (see there). (The reason never comes from this text: see
// LooksTruncated.)
std::string TakeVipsError(ImageKind kind) {
  GStringPtr text(vips_error_buffer_copy());
  std::string all = text ? text.get() : "";
  // The word libvips' loader of each type puts in its messages (BMP goes through magick).
  static constexpr std::pair<ImageKind, const char*> kLoaders[] = {
      {ImageKind::kJpeg, "jpeg"}, {ImageKind::kPng, "png"},   {ImageKind::kGif, "gif"},
      {ImageKind::kWebp, "webp"}, {ImageKind::kTiff, "tiff"}, {ImageKind::kBmp, "magick"}};
  const char* name = nullptr;
  for (const auto& [k, loader] : kLoaders) {
    if (k == kind) name = loader;
  }
  std::string first, match;
  size_t start = 0;
  while (start < all.size()) {
    size_t nl = all.find('\n', start);
    std::string line = all.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? all.size() : nl + 1;
    if (line.empty()) continue;
    if (first.empty()) first = line;
    const std::string lower = AsciiLower(line);
    if (name != nullptr && match.empty() && lower.find(name) != std::string::npos) match = line;
  }
  std::string s = !match.empty() ? match : first;
  if (s.empty()) s = "libvips failed without a message";
  return s;
}

bool DecodeFail(ImageKind kind, const std::string& bytes, ImageFailure* failure) {
  t_failed_in_vips = true;
  std::string detail = TakeVipsError(kind);
  return Fail(failure, LooksTruncated(kind, bytes, detail) ? "truncated_image" : "corrupt_image",
              std::move(detail));
}

bool RunUnderVipsErrorGate(const std::function<bool()>& decode) {
  t_failed_in_vips = false;
  {
    std::shared_lock<VipsErrorGate> shared(g_vips_error_gate);
    if (decode()) return true;
  }
  if (!t_failed_in_vips) return false;  // the detail is not libvips' text
  // Again, alone: libvips' error buffer then holds this file's lines only (VipsErrorGate).
  std::unique_lock<VipsErrorGate> alone(g_vips_error_gate);
  vips_error_clear();
  return decode();
}

Status InitVips() {
  std::call_once(g_vips_once, [] {
    if (VIPS_INIT("mmpack") != 0) {
      g_vips_error = TakeVipsError();
      return;
    }
    // Decode problems become ImageFailures; libvips' own warnings would only repeat them.
    g_log_set_handler(
        "VIPS", G_LOG_LEVEL_WARNING, [](const gchar*, GLogLevelFlags, const gchar*, gpointer) {},
        nullptr);
    vips_concurrency_set(1);  // parallelism is across samples (TBB), not inside one
    vips_cache_set_max(0);    // no operation cache: memory must not grow with the input
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    g_vips_ok = true;
  });
  if (!g_vips_ok) return Status::Internal("cannot start libvips: " + g_vips_error);
  return Status::OK();
}

}  // namespace mm::pack
