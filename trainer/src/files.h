// files.h: the trainer's file access, safe against what a path may hold: a FIFO or device is
// refused before anything blocks on it (opened O_NONBLOCK, then fstat), sizes are bounded
// before memory is taken, and every write goes to a temporary file that is fsync'ed and
// renamed over the target (a crash leaves the old file or the new one, never half of one).
// Reading and writing go through the shared mm/internal/file.h. Every error
// is a std::runtime_error naming the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace mm::train {

/// The whole of the regular file `path` (mm::ReadRegularFile, mm/internal/file.h). Throws
/// "`what`: <status>" when it is missing, not a regular file (FIFO, device, directory: refused
/// without blocking), larger than `max_bytes`, or unreadable.
std::string ReadWholeFile(const std::string& path, int64_t max_bytes, const std::string& what);

/// mm::WriteFileDurably (mm/internal/file.h) through PATH.tmp.<pid>: a crash leaves the old
/// file or the new one. Throws the Status's message ("cannot write PATH.tmp.<pid>: ...").
void WriteFileAtomically(const std::string& path, const std::string& bytes);

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

/// `path` opened for appending (created 0644 when missing); refused without blocking when it
/// is not a regular file.
FilePtr OpenRegularForAppend(const std::string& path);

/// Physical memory of this machine, bytes (sysconf); 0 when unknown.
uint64_t PhysicalMemoryBytes();

}  // namespace mm::train
