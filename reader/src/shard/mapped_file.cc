#include "shard/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "mm/internal/file.h"

namespace mm::reader::internal {

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, path + ": fstat");
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return ErrnoStatus(errno, path + ": mmap");
    file->data_ = static_cast<const uint8_t*>(p);
    file->guard_ = RegisterMapping(p, file->size_);
  }
  // The mapping stays valid after the descriptor is closed.
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      guard_(std::exchange(other.guard_, nullptr)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    UnregisterMapping(guard_);
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    guard_ = std::exchange(other.guard_, nullptr);
  }
  return *this;
}

MappedFile::~MappedFile() {
  UnregisterMapping(guard_);  // before the range can be mapped again by another file
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace mm::reader::internal
