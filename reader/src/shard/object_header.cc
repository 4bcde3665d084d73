// object_header.cc: the object header scan for the Data Layout message (see object_header.h).
#include "shard/object_header.h"

#include <string>
#include <unordered_set>
#include <utility>

namespace mm::reader::internal {
namespace {

constexpr uint64_t kLayoutMessage = 0x0008;
constexpr uint64_t kContinuationMessage = 0x0010;
constexpr uint64_t kChunkedClass = 2;

// Names of the chunk index types of a version 4 layout message.
const char* IndexTypeName(uint64_t type) {
  static constexpr const char* kNames[] = {"unknown",     "single chunk",     "implicit",
                                           "fixed array", "extensible array", "version 2 B-tree"};
  return kNames[type < 6 ? type : 0];
}

Result<ChunkedLayout> ParseLayout(const H5Bytes& w, uint64_t begin, uint64_t end) {
  Cursor c = w.Read(begin, end);
  const uint64_t version = c.U(1);
  ChunkedLayout out;
  uint64_t ndims = 0, cls = 0;
  if (version == 1 || version == 2) {
    ndims = c.U(1);
    cls = c.U(1);
    c.Skip(5);  // reserved
  } else if (version == 3) {
    cls = c.U(1);
    ndims = cls == kChunkedClass ? c.U(1) : 0;
  } else if (version == 4) {
    cls = c.U(1);
    if (c.ok() && cls == kChunkedClass) {
      c.Skip(1);  // flags
      const uint64_t n = c.U(1);
      const uint64_t dim_bytes = c.U(1);
      c.Skip(n * dim_bytes);
      const uint64_t type = c.U(1);
      return Status::Unsupported(std::string("chunk index is a ") +
                                 IndexTypeName(c.ok() ? type : 0) +
                                 " (layout message version 4, written under libver v110 or "
                                 "later), not the version 1 B-tree");
    }
  } else {
    return Status::Corruption("layout message version " + std::to_string(version) + At(begin));
  }
  if (c.ok() && cls != kChunkedClass) {
    return Status::Corruption("layout message" + At(begin) + " is not of a chunked dataset");
  }
  if (!c.ok() || ndims < 2 || ndims > kMaxLayoutDims) {
    return Status::Corruption("malformed layout message" + At(begin));
  }
  out.btree = c.U(w.sb.sizeof_addr);
  for (uint64_t d = 0; d < ndims; ++d) out.dims.push_back(static_cast<uint32_t>(c.U(4)));
  if (!c.ok()) return Status::Corruption("layout message" + At(begin) + " cut short");
  return out;
}

// The object header: the prefix (version 1, or "OHDR" version 2), then each block of messages,
// the first and every continuation, each at most once. Finds the one layout message.
class HeaderScan {
 public:
  explicit HeaderScan(const H5Bytes& w) : w_(w) {}

  Result<ChunkedLayout> Run(uint64_t header_address) {
    uint64_t pos = 0;
    if (!w_.Locate(header_address, 16, &pos)) {
      return Status::Corruption("object header address " + std::to_string(header_address) +
                                " lies outside the file");
    }
    MM_RETURN_NOT_OK(ReadPrefix(pos));
    while (!pending_.empty()) {
      auto [begin, end] = pending_.back();
      pending_.pop_back();
      MM_RETURN_NOT_OK(ScanBlock(begin, end));
    }
    if (!found_) return Status::Corruption("object header" + At(pos) + " has no layout message");
    return std::move(layout_);
  }

 private:
  Status ReadPrefix(uint64_t pos) {
    static constexpr char kV2[4] = {'O', 'H', 'D', 'R'};
    Cursor c = w_.Read(pos, w_.file_size);
    if (c.Matches(kV2, 4)) {
      version_ = 2;
      if (c.U(1) != 2) return Status::Corruption("object header" + At(pos) + ": bad version");
      flags_ = static_cast<unsigned>(c.U(1));
      if (flags_ & 0x20) c.Skip(16);  // access, modification, change, birth times
      if (flags_ & 0x10) c.Skip(4);   // attribute storage phase change values
      const uint64_t size = c.U(1u << (flags_ & 3));
      // Messages, then a 4-byte checksum.
      return AddBlock(c.pos(), size, c.ok() && size <= c.left() && c.left() - size >= 4, pos);
    }
    version_ = 1;
    const uint64_t version = c.U(1);
    c.Skip(1 + 2 + 4);  // reserved, message count, reference count
    const uint64_t size = c.U(4);
    c.Skip(4);  // padding to 8 bytes
    if (!c.ok() || version != 1) {
      return Status::Corruption("object header" + At(pos) + ": not version 1 or 2");
    }
    return AddBlock(c.pos(), size, size <= c.left(), pos);
  }

  // Queues the message block [begin, begin + size) once.
  Status AddBlock(uint64_t begin, uint64_t size, bool fits, uint64_t where) {
    if (!fits) return Status::Corruption("object header block" + At(where) + " runs past the file");
    if (!seen_.insert(begin).second) {
      return Status::Corruption("object header continuation" + At(where) + " loops back");
    }
    if (seen_.size() > static_cast<size_t>(kMaxHeaderBlocks)) {
      return Status::Corruption("object header with more than " + std::to_string(kMaxHeaderBlocks) +
                                " continuation blocks");
    }
    pending_.emplace_back(begin, begin + size);
    return Status::OK();
  }

  Status ScanBlock(uint64_t begin, uint64_t end) {
    const uint64_t header_bytes = version_ == 1 ? 8 : (flags_ & 0x04) ? 6 : 4;
    Cursor c = w_.Read(begin, end);
    while (c.left() >= header_bytes) {
      const uint64_t at = c.pos();
      const uint64_t type = c.U(version_ == 1 ? 2 : 1);
      const uint64_t size = c.U(2);
      c.Skip(header_bytes - (version_ == 1 ? 4 : 3));  // flags, reserved / creation order
      if (!c.ok() || size > c.left()) {
        return Status::Corruption("object header message" + At(at) + " runs past its block");
      }
      const uint64_t data = c.pos();
      c.Skip(size);
      if (type == kContinuationMessage) {
        MM_RETURN_NOT_OK(Continue(data, data + size, at));
      } else if (type == kLayoutMessage) {
        if (found_) return Status::Corruption("second layout message" + At(at));
        MM_ASSIGN_OR_RETURN(layout_, ParseLayout(w_, data, data + size));
        found_ = true;
      }
    }
    return Status::OK();
  }

  // A continuation message: the address and length of the next block of messages.
  Status Continue(uint64_t begin, uint64_t end, uint64_t at) {
    Cursor c = w_.Read(begin, end);
    const uint64_t addr = c.U(w_.sb.sizeof_addr);
    const uint64_t length = c.U(w_.sb.sizeof_size);
    uint64_t pos = 0;
    if (!c.ok() || !w_.Locate(addr, length, &pos)) {
      return Status::Corruption("object header continuation" + At(at) + " points outside the file");
    }
    if (version_ == 1) return AddBlock(pos, length, true, at);
    static constexpr char kChunk[4] = {'O', 'C', 'H', 'K'};
    Cursor s = w_.Read(pos, pos + length);
    if (length < 8 || !s.Matches(kChunk, 4)) {
      return Status::Corruption("object header continuation block" + At(pos) + " is not OCHK");
    }
    return AddBlock(pos + 4, length - 8, true, at);  // signature and checksum excluded
  }

  const H5Bytes& w_;
  int version_ = 1;
  unsigned flags_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> pending_;  // blocks [begin, end) to scan
  std::unordered_set<uint64_t> seen_;                   // blocks queued so far
  ChunkedLayout layout_;
  bool found_ = false;
};

}  // namespace

Result<ChunkedLayout> FindChunkedLayout(const H5Bytes& f, uint64_t header_address) {
  return HeaderScan(f).Run(header_address);
}

}  // namespace mm::reader::internal
