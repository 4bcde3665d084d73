// mm/internal/file.h: the one translation of errno into a Status (after Arrow's
// IOErrorFromErrno), the owner of a file descriptor, and the one safe way to open and read a
// file that a dataset or a shard set names: without blocking and only if it is a regular file.
//
// Why: a path in a manifest or an index.json is input, and input may be hostile. open() of a
// FIFO waits for a writer for ever, and /dev/zero never ends; a 50 GB sparse file would
// exhaust memory. OpenRegularFile opens with O_NONBLOCK and refuses what is not a regular
// file; ReadRegularFile also checks the size before reading a byte.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/file.cc). Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "mm/internal/unique_handle.h"
#include "mm/status.h"

namespace mm {

/// A Status for the failed system call that set `err` (errno): NotFound for ENOENT and
/// ENOTDIR, IOError for anything else; the message is `what` + ": " + strerror(err), e.g.
/// "cannot open /x/a.jpg: Permission denied".
Status ErrnoStatus(int err, const std::string& what);

struct FdTraits {
  static constexpr int kInvalid = -1;
  static bool Valid(int fd) { return fd >= 0; }
  static void Close(int fd);  // ::close; a failed close of a read-only descriptor loses nothing
};
/// Move-only owner of a file descriptor; closes it in the destructor.
using UniqueFd = UniqueHandle<int, FdTraits>;

/// A regular file opened for reading, and its size in bytes when opened.
struct RegularFile {
  UniqueFd fd;
  int64_t size = 0;
};

/// Opens `path` read-only (O_CLOEXEC | O_NONBLOCK: a FIFO does not wait for a writer) and
/// checks that it is a regular file.
/// Errors: NotFound ("no such file: PATH"), IOError ("cannot open PATH: <strerror>";
/// "cannot read PATH: Is a directory"; "cannot read PATH: not a regular file (FIFO, device or
/// socket)").
[[nodiscard]] Result<RegularFile> OpenRegularFile(const std::string& path);

/// Reads the whole regular file `path` into `bytes`, at most `max_bytes` bytes (-1: no limit;
/// checked from the size before reading, so a 50 GB sparse file costs nothing, and again while
/// reading, for a file that grows).
/// Errors: those of OpenRegularFile; IOError ("cannot read PATH: <strerror>"); OutOfRange
/// (larger than max_bytes: "PATH is N bytes, over the M bytes read of one file").
[[nodiscard]] Status ReadRegularFile(const std::string& path, std::string* bytes,
                                     int64_t max_bytes = -1);

/// A new unnamed file in the folder `dir`, open for reading and writing: O_TMPFILE, or where
/// the file system has none, a file named `dir`/`name_prefix`XXXXXX removed at once. Either way
/// nothing is left behind when it is closed, however the process ends.
/// Errors: those of ErrnoStatus(errno, what).
[[nodiscard]] Result<UniqueFd> OpenUnnamedFile(const std::string& dir,
                                               const std::string& name_prefix,
                                               const std::string& what);

/// Writes all `size` bytes at `data` to `fd`, going on after short writes and EINTR.
/// Errors: those of ErrnoStatus(errno, what) ("WHAT: No space left on device").
[[nodiscard]] Status WriteAll(int fd, const void* data, size_t size, const std::string& what);

/// Writes `bytes` to `path` so that a crash leaves the old file or the whole new one: to
/// TMP = `path` + `tmp_suffix` (created or truncated, mode 0644), fsynced, renamed over `path`,
/// and `path`'s folder fsynced where the folder allows. Whatever stood at `path` (a FIFO
/// included) is replaced, never opened. On failure TMP is removed. Several processes writing
/// one path at once give each its own suffix (the trainer's ".tmp.<pid>").
/// Errors: those of ErrnoStatus ("cannot write TMP: <strerror>", "fsync TMP: ...",
/// "rename TMP -> PATH: ...").
[[nodiscard]] Status WriteFileDurably(const std::string& path, const std::string& bytes,
                                      const std::string& tmp_suffix = ".tmp");

}  // namespace mm
