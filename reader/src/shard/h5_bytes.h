// h5_bytes.h: reading HDF5 structures straight from a file's bytes, for the chunk index walk
// (chunk_index.h): a bounds-checked little-endian cursor and the superblock. Private to
// mm_reader. Field layouts: HDF5 File Format Specification version 3.0, section II.A.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "mm/status.h"

namespace mm::reader::internal {

/// " at file offset 1234", for messages.
inline std::string At(uint64_t pos) { return " at file offset " + std::to_string(pos); }

/// Sequential little-endian reads from [pos, end) of the file; a read past `end` fails and the
/// cursor stays failed (ok() == false), so a parse checks once at the end of a structure.
class Cursor {
 public:
  Cursor(const uint8_t* file, uint64_t file_size, uint64_t pos, uint64_t end)
      : file_(file), pos_(pos), end_(end < file_size ? end : file_size) {
    if (pos_ > end_) ok_ = false;
  }
  uint64_t U(unsigned width) {  // width in 1..8
    if (!ok_ || width > end_ - pos_) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < width; ++i) v |= uint64_t{file_[pos_ + i]} << (8 * i);
    pos_ += width;
    return v;
  }
  void Skip(uint64_t n) {
    if (!ok_ || n > end_ - pos_) {
      ok_ = false;
      return;
    }
    pos_ += n;
  }
  bool Matches(const void* bytes, size_t n) {
    if (!ok_ || n > end_ - pos_ || std::memcmp(file_ + pos_, bytes, n) != 0) return false;
    pos_ += n;
    return true;
  }
  bool ok() const { return ok_; }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return ok_ ? end_ - pos_ : 0; }

 private:
  const uint8_t* file_;
  uint64_t pos_;
  uint64_t end_;
  bool ok_ = true;
};

/// What a walk needs from the superblock.
struct Superblock {
  uint64_t base = 0;  // absolute offset that file addresses are relative to
  unsigned sizeof_addr = 8;
  unsigned sizeof_size = 8;
};

/// A file's bytes and its superblock: what every structure's parse reads through.
struct H5Bytes {
  const uint8_t* file;
  uint64_t file_size;
  Superblock sb;

  Cursor Read(uint64_t pos, uint64_t end) const { return Cursor(file, file_size, pos, end); }
  bool Undefined(uint64_t addr) const {  // HDF5's "undefined address": all bits set
    return sb.sizeof_addr == 8 ? addr == std::numeric_limits<uint64_t>::max()
                               : addr == (uint64_t{1} << (8 * sb.sizeof_addr)) - 1;
  }
  // Absolute offset of base-relative `addr` when `bytes` from there lie in the file.
  bool Locate(uint64_t addr, uint64_t bytes, uint64_t* pos) const {
    if (Undefined(addr) || addr > file_size - sb.base) return false;
    *pos = sb.base + addr;
    return bytes <= file_size - *pos;
  }
};

/// Finds and reads the superblock: HDF5 looks for its signature at 0, 512, 1024, 2048, ... (a
/// user block before it). Its address and length sizes must be `sizeof_addr` and `sizeof_size`
/// and its location `userblock`, as HDF5 reported them, and its base address its own location.
/// Errors: Corruption.
Result<Superblock> ReadSuperblock(const uint8_t* file, uint64_t size, unsigned sizeof_addr,
                                  unsigned sizeof_size, uint64_t userblock);

}  // namespace mm::reader::internal
