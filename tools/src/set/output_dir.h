// output_dir.h: where `mmpack build` writes, so that OUT is never half-built and never
// someone else's data (build/build.h; also `mmpack retokenize`). Everything is built in a sibling
// folder "OUT.mmpack-partial" and published at the end (set_publish.h), so a failed build leaves no
// half set and an --overwrite build keeps the old set until the new one is complete. OUT is
// normalised first ("out/" is "out"); the build's CheckPaths (build/plan.h) says which OUT may be
// replaced.
#pragma once

#include <filesystem>
#include <string>
#include <utility>

#include "mm/status.h"

namespace mm::pack {

/// OUT as an absolute, lexically normal path without a trailing separator, so "out/", "out"
/// and "./x/../out" name the same folder and its last component is never empty, "." or "..".
/// The parent is resolved through symlinks (weakly_canonical); the last component is kept as
/// given, so an OUT that is a symlink is replaced as a link, not through it.
std::filesystem::path NormalOutput(const std::string& given);

/// Refuses an output that is a URL (`-o s3://bucket/set`, `-o https://...`, any
/// "scheme://"): mmpack writes local files only, and such a path would otherwise become a local
/// folder named "s3:". `what`: the option as messages name it ("output", "-o"). Checked before
/// anything is created (the build lock makes OUT's parent). Errors: InvalidArgument, one line
/// naming `mmpack upload`.
[[nodiscard]] Status RefuseUrlOutput(const std::string& given, const std::string& what);

/// The staging folder of `out` (NormalOutput): "OUT.mmpack-partial" beside it.
std::filesystem::path StagingPath(const std::filesystem::path& out);

/// Creates the (empty) staging folder "OUT.mmpack-partial" beside `out` (NormalOutput, so the
/// staging folder is never inside OUT), replacing one an earlier build left. Errors: IOError
/// (OUT's parent not writable), AlreadyExists (the old folder holds something no build writes
/// there, e.g. files a --resume did not publish: it is not deleted).
[[nodiscard]] Result<std::filesystem::path> MakeStaging(const std::filesystem::path& out);

/// Writes `text` to `path` (created or truncated) with write(2), so that a failure says why
/// ("cannot write PATH: No space left on device"). Errors: IOError.
[[nodiscard]] Status WriteText(const std::filesystem::path& path, const std::string& text);

/// Removes the staging folder unless disarmed (every failure path after MakeStaging).
class StagingGuard {
 public:
  explicit StagingGuard(std::filesystem::path p) : path_(std::move(p)) {}
  ~StagingGuard();
  StagingGuard(const StagingGuard&) = delete;
  StagingGuard& operator=(const StagingGuard&) = delete;
  void Disarm() { path_.clear(); }
  void Arm(std::filesystem::path p) { path_ = std::move(p); }

 private:
  std::filesystem::path path_;
};

}  // namespace mm::pack
