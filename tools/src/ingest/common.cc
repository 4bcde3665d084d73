// common.cc: see common.h.
#include "ingest/common.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "mm/internal/file.h"
#include "text/ascii.h"

namespace mm::pack {

namespace fs = std::filesystem;

const char* const kImageExtensions[] = {"jpg", "jpeg", "png", "webp", "gif", "tif", "tiff", "bmp"};

bool IsImageExtension(const std::string& ext_no_dot) {
  std::string e = AsciiLower(ext_no_dot);
  for (const char* x : kImageExtensions) {
    if (e == x) return true;
  }
  return false;
}

void StripBom(std::string* s) {
  if (s->size() >= 3 && static_cast<unsigned char>((*s)[0]) == 0xEF &&
      static_cast<unsigned char>((*s)[1]) == 0xBB && static_cast<unsigned char>((*s)[2]) == 0xBF) {
    s->erase(0, 3);
  }
}

void StripOneNewline(std::string* s) {
  if (!s->empty() && s->back() == '\n') {
    s->pop_back();
    if (!s->empty() && s->back() == '\r') s->pop_back();
  }
}

std::string Resolve(const fs::path& base_dir, const std::string& given) {
  fs::path p(given);
  if (p.is_absolute()) return p.string();
  return (base_dir / p).lexically_normal().string();
}

MappedText::~MappedText() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

Status MappedText::Open(const fs::path& file, int fd) {
  RegularFile f;
  if (fd < 0) {
    MM_ASSIGN_OR_RETURN(f, OpenRegularFile(file.string()));
    fd = f.fd.get();
  } else {
    struct stat st;
    if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot read " + file.string());
    f.size = st.st_size;
  }
  size_ = static_cast<size_t>(f.size);
  if (size_ == 0) return Status::OK();
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "cannot map " + file.string());
  base_ = static_cast<char*>(p);
  ::madvise(base_, size_, MADV_SEQUENTIAL);
  return Status::OK();
}

void MappedText::DoneBefore(size_t offset) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t end = offset / page * page;
  if (base_ == nullptr || end < released_ + (size_t{4} << 20)) return;
  ::madvise(base_ + released_, end - released_, MADV_DONTNEED);
  released_ = end;
}

}  // namespace mm::pack
