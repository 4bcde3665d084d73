// set_lock.h: one `mmpack build` per OUT at a time. Two builds into one OUT would clear the
// same staging folder and publish an index of shards the other had deleted.
// The lock is flock(2) on "OUT.mmpack-lock" beside OUT (not inside: OUT is renamed as a whole),
// held from before OUT is examined until the build returns; the kernel releases it when the
// process dies, so a killed build never leaves a stale lock. The file is removed on release
// (a waiting build re-checks that the file it locked is still the one at the path).
#pragma once

#include <filesystem>

#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::pack {

/// The held lock on an OUT; released (and its file removed) by the destructor. Move-only.
class SetLock {
 public:
  SetLock() = default;
  SetLock(SetLock&&) = default;
  SetLock& operator=(SetLock&&) = default;
  ~SetLock();

  /// The lock file's path, for messages.
  const std::filesystem::path& path() const { return path_; }

 private:
  friend Result<SetLock> LockOutput(const std::filesystem::path& out, bool shared);
  std::filesystem::path path_;
  UniqueFd fd_;
  bool shared_ = false;
};

/// Takes the build lock of `out` (a NormalOutput path) without waiting, creating OUT's parent
/// if missing. `shared`: the lock that the processes of a build in parts (build_parts.h) hold
/// together (flock LOCK_SH); it keeps a one-process build out, and its file is left in place
/// for the next build to remove. Errors: AlreadyExists ("another mmpack build (pid 123) is writing OUT; lock
/// OUT.mmpack-lock"), IOError (the lock file cannot be created).
[[nodiscard]] Result<SetLock> LockOutput(const std::filesystem::path& out, bool shared = false);

}  // namespace mm::pack
