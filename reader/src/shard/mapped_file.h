// mapped_file.h: a read-only memory mapping of a whole file. Private to mm_reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mm/status.h"
#include "shard/mapping_guard.h"

namespace mm::reader::internal {

/// Owns a read-only, shared mapping of one file (page cache, not anonymous memory), registered
/// with the SIGBUS guard (mapping_guard.h) so that the file being truncated under it makes the
/// mapping read zeros and report !intact() instead of killing the process. Move-only; unmaps in
/// the destructor. Hold it through a shared_ptr to hand out views that outlive the
/// object that opened it. Thread-safe for reads.
class MappedFile {
 public:
  /// Maps `path` whole. An empty file gives an empty mapping (data() == nullptr).
  /// Errors: NotFound (no such file), IOError (open, fstat or mmap failed).
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  /// Bytes mapped: the file size at Open.
  uint64_t size() const { return size_; }
  /// False once a page past the file's end was touched (the file was truncated after Open, or
  /// its storage failed): those pages now read as zeros (mapping_guard.h).
  bool intact() const { return MappingFaults(guard_) == 0; }
  /// True when [offset, offset + length) lies inside the file (overflow-safe).
  bool Contains(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  GuardSlot* guard_ = nullptr;  // its registration with the SIGBUS handler
};

}  // namespace mm::reader::internal
