// cache_files.h: the files of the shard cache's folder as the cache names, finds and removes
// them (the layout is cache.h's): a folder opened without following a symlink, the names the
// cache gives its files, the scan of DIR/sets, the removal of a file no process holds, and the
// folder of one set with its location file. Internal to remote/cache*.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::reader::internal::cache_files {

constexpr char kPartMark[] = ".part.";
constexpr char kLockSuffix[] = ".lock";
constexpr char kWaitingDir[] = "waiting";
constexpr char kLocationFile[] = "location";

/// flock that resumes after a signal. Returns 0 or -1 with errno.
int Flock(int fd, int op);

bool EndsWith(const std::string& s, const std::string& tail);

/// The names in a directory (not "." and ".."), read through its descriptor.
std::vector<std::string> ListDir(int dir);

/// Whether `s` is 16 lowercase hex digits (a set folder's name: XXH3-64 of its location).
bool IsHex16(const std::string& s);

/// A folder of the cache, opened without following a symlink (O_NOFOLLOW): what is found and
/// removed in it is found and removed through this descriptor, never through a path that a
/// symlink could lead elsewhere.
using DirFd = std::shared_ptr<const UniqueFd>;

/// `name` under the folder `at`, opened as a DirFd; `display` names it in messages.
/// Errors: IOError ("cache: X is not a folder (a symlink?)..."), those of ErrnoStatus.
Result<DirFd> OpenDirNoFollow(int at, const std::string& name, const std::string& display);

/// The kinds of files the cache names in a set folder (cache.h).
enum class FileKind { kShard, kTemporary, kLock };

/// One file the cache accounts for, in its set folder `dir`.
struct CacheEntry {
  DirFd dir;
  std::string name;
  std::string path;  // for messages
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
  FileKind kind = FileKind::kShard;
};

/// Every shard, temporary and lock file the cache wrote under DIR/sets (see cache.h): in the
/// set folders it made (real folders, never a symlink, with their location file), regular
/// files named as it names them. Nothing else is listed, so nothing else is ever removed.
std::vector<CacheEntry> Scan(const std::string& dir);

/// Removes `e` if no process holds a lock on it (a pinned shard, a live download, a download
/// lock held or waited for) and it is still the file that was listed: true when removed. A
/// shard file must also start with HDF5's signature: a file of another kind was not written by
/// the cache, whatever its name.
bool RemoveIfUnlocked(const CacheEntry& e);

/// DIR/sets/<X> for the set at `location`, with its location file: a real folder of the
/// cache (a symlink there is refused, never followed). Errors: IOError (another set's folder,
/// not writable).
Result<std::string> SetDir(const std::string& dir, const std::string& location);

}  // namespace mm::reader::internal::cache_files
