// checksum.cc: see mm/internal/checksum.h.
#include "mm/internal/checksum.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "mm/internal/c_handles.h"
#include "mm/internal/file.h"

namespace mm {
namespace {

std::string Hex(const unsigned char* bytes, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    hex.push_back(kHex[bytes[i] >> 4]);
    hex.push_back(kHex[bytes[i] & 15]);
  }
  return hex;
}

// Calls `consume(data, size)` for each block `fd` reads until its end. Errors: IOError naming
// `what` ("read PATH: ...").
template <typename Consume>
Status ReadBlocks(int fd, size_t block, const std::string& what, Consume consume) {
  std::vector<char> buffer(block);
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus(errno, what);
    if (got == 0) return Status::OK();
    consume(buffer.data(), static_cast<size_t>(got));
  }
}

}  // namespace

std::string Xxh3Hex64(uint64_t digest) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(digest));
  return hex;
}

std::string Xxh3Hex(const void* data, size_t size) { return Xxh3Hex64(XXH3_64bits(data, size)); }

Result<std::string> Xxh3HexOfFd(int fd, const std::string& path) {
  Xxh3StatePtr state(XXH3_createState());
  if (!state) return Status::Internal("XXH3_createState failed");
  XXH3_64bits_reset(state.get());
  MM_RETURN_NOT_OK(ReadBlocks(fd, 1 << 20, "read " + path, [&](const char* data, size_t n) {
    XXH3_64bits_update(state.get(), data, n);
  }));
  return Xxh3Hex64(XXH3_64bits_digest(state.get()));
}

Result<std::string> Xxh3HexOfFile(const std::string& path) {
  MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(path));
  return Xxh3HexOfFd(file.fd.get(), path);
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) {
    return std::string();
  }
  return Hex(digest, len);
}

Result<std::string> Sha256HexOfFile(const std::string& path) {
  return Sha256HexOfFileRange(path, 0, -1);
}

Result<std::string> Sha256HexOfFileRange(const std::string& path, int64_t offset, int64_t size) {
  MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(path));
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Status::Internal("EVP_DigestInit_ex(sha256) failed");
  }
  if (size < 0) {
    MM_RETURN_NOT_OK(
        ReadBlocks(file.fd.get(), 1 << 16, "reading " + path,
                   [&](const char* data, size_t n) { EVP_DigestUpdate(ctx.get(), data, n); }));
  } else {
    std::vector<char> buffer(1 << 16);
    for (int64_t done = 0; done < size;) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(size - done, 1 << 16));
      const ssize_t got = ::pread(file.fd.get(), buffer.data(), want, offset + done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ErrnoStatus(errno, "reading " + path);
      if (got == 0) {
        return Status::IOError("reading " + path + ": it ends before byte " +
                               std::to_string(offset + size));
      }
      EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(got));
      done += got;
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) {
    return Status::Internal("EVP_DigestFinal_ex(sha256) failed");
  }
  return Hex(digest, length);
}

}  // namespace mm
