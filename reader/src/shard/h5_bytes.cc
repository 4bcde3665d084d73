// h5_bytes.cc: the superblock (see h5_bytes.h).
#include "shard/h5_bytes.h"

namespace mm::reader::internal {
namespace {

constexpr uint8_t kSuperblockSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

}  // namespace

Result<Superblock> ReadSuperblock(const uint8_t* file, uint64_t size, unsigned sizeof_addr,
                                  unsigned sizeof_size, uint64_t userblock) {
  uint64_t at = size;
  for (uint64_t pos = 0; pos < size; pos = pos == 0 ? 512 : pos * 2) {
    Cursor c(file, size, pos, size);
    if (c.Matches(kSuperblockSignature, sizeof(kSuperblockSignature))) {
      at = pos;
      break;
    }
  }
  if (at == size) return Status::Corruption("no HDF5 superblock signature");
  Cursor c(file, size, at + 8, size);
  const uint64_t version = c.U(1);
  Superblock sb;
  if (version <= 1) {
    c.Skip(4);  // versions of the free-space info, root symbol table entry, shared headers
    sb.sizeof_addr = static_cast<unsigned>(c.U(1));
    sb.sizeof_size = static_cast<unsigned>(c.U(1));
    c.Skip(1 + 2 + 2 + 4 + (version == 1 ? 4 : 0));  // reserved, group K's, flags, [istore K]
  } else if (version <= 3) {
    sb.sizeof_addr = static_cast<unsigned>(c.U(1));
    sb.sizeof_size = static_cast<unsigned>(c.U(1));
    c.Skip(1);  // consistency flags
  } else {
    return Status::Corruption("superblock version " + std::to_string(version) + At(at));
  }
  auto valid = [](unsigned s) { return s == 2 || s == 4 || s == 8; };
  if (!c.ok() || !valid(sb.sizeof_addr) || !valid(sb.sizeof_size)) {
    return Status::Corruption("malformed superblock" + At(at));
  }
  sb.base = c.U(sb.sizeof_addr);
  if (!c.ok()) return Status::Corruption("superblock cut short" + At(at));
  if (sb.sizeof_addr != sizeof_addr || sb.sizeof_size != sizeof_size) {
    return Status::Corruption("superblock gives " + std::to_string(sb.sizeof_addr) + "-byte " +
                              "addresses and " + std::to_string(sb.sizeof_size) +
                              "-byte lengths, HDF5 reported " + std::to_string(sizeof_addr) +
                              " and " + std::to_string(sizeof_size));
  }
  if (at != userblock || sb.base != at) {
    return Status::Corruption("superblock" + At(at) + " with base address " +
                              std::to_string(sb.base) + ", HDF5 reported a user block of " +
                              std::to_string(userblock) + " bytes");
  }
  return sb;
}

}  // namespace mm::reader::internal
