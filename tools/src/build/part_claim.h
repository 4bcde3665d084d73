// part_claim.h: which process is building a part of a build in parts (build_parts.h), so
// that a part is never built by two processes at once and a part waiting for part 0 can tell
// a part 0 that died from one that is slow.
//
// Each part holds flock(2) on OUT.mmpack-partial/.parts/part-III-of-NNN.lock from before its
// ingest until it returns, and writes in it one JSON line: {"pid", "host", "start"} (start:
// seconds since the epoch). While it holds the lock a thread touches the file every
// kHeartbeatSeconds, so its mtime is a heartbeat that other machines sharing the folder can
// read. The kernel (or the NFS lock manager) releases the lock when the process dies, however
// it dies; the file stays, naming the last holder, until the set is published.
//
// A second process given the same part is refused at once, naming the holder. A part waiting
// for part 0 (the tokenizer) asks PartLiveness(0): on the same host, a pid that no longer exists
// or a lock nobody holds means part 0 is not running; on another host, a heartbeat older than
// kHeartbeatTimeoutSeconds does.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include "build/parts.h"
#include "mm/status.h"

namespace mm::pack {

/// Seconds between two touches of a held part lock.
inline constexpr int kHeartbeatSeconds = 10;
/// A part on another host whose lock file was not touched for this long is taken for dead
/// (it allows for clock skew between the hosts and the file server).
inline constexpr int kHeartbeatTimeoutSeconds = 300;

/// The held claim of one part; released (the lock dropped, the heartbeat stopped) by the
/// destructor. Move-only. Not thread-safe (one owner).
class PartClaim {
 public:
  PartClaim();
  PartClaim(PartClaim&&) noexcept;
  PartClaim& operator=(PartClaim&&) noexcept;
  ~PartClaim();

  /// Claims `part` of the build whose staging folder is `staging`, creating the folder and
  /// .parts when missing. Errors: AlreadyExists ("part 1 of 4 is being built by pid 123 on
  /// host h since 2026-11-30 10:00:00 UTC (LOCK); wait for it, or stop it"), IOError.
  [[nodiscard]] static Result<PartClaim> Take(const std::filesystem::path& staging,
                                              const PartSpec& part);

  /// The part has started its work in the staging folder: Abandon no longer removes anything.
  void Started() { created_staging_ = created_parts_ = false; }

  /// For a part that fails before it started: removes the lock file, and .parts and the
  /// staging folder when this claim created them and nothing else is in them, so a refused
  /// part leaves nothing behind. While other parts are in the folder, the file stays (its
  /// holder's pid no longer runs: parts waiting for it see that).
  void Abandon();

 private:
  struct Heartbeat;
  std::filesystem::path path_;  // the lock file
  std::filesystem::path staging_;
  bool created_staging_ = false, created_parts_ = false;
  std::unique_ptr<Heartbeat> heartbeat_;  // holds the file descriptor
};

/// What is known of the process that claimed a part.
struct PartHolder {
  enum class State {
    kNotStarted,  // no lock file: the part has not started (a job array may start it later)
    kRunning,     // the lock is held (same host), or the heartbeat is recent (another host)
    kGone,        // it no longer runs: pid gone or lock free (same host), heartbeat old (other)
  };
  State state = State::kNotStarted;
  int64_t pid = 0;
  std::string host;
  std::time_t start = 0;         // when it claimed the part
  std::time_t beat = 0;          // the lock file's mtime
  std::string Describe() const;  // "pid 123 on host h, started 2026-11-30 10:00:00 UTC"
};

/// The state of the process that last claimed `index` of `count` parts in `staging`.
PartHolder PartLiveness(const std::filesystem::path& staging, int64_t index, int64_t count);

}  // namespace mm::pack
