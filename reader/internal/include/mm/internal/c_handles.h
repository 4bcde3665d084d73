// mm/internal/c_handles.h: one owner per C handle type that the reader's libraries hold, all in
// one place (after llama.cpp's ggml-cpp.h): a std::unique_ptr whose deleter is the library's own
// free function, one line each. Integer handles (file descriptors, HDF5's hid_t) have move-only
// owners of the same shape in mm/internal/unique_handle.h; the handles only the tools hold
// (libarchive, TurboJPEG, libvips) have theirs in tools/src/base/c_handles.h.
//
// Internal (reader/internal/include, through the mm_reader_internal target). Including this
// header links nothing: a deleter's library is linked by the code that creates the handle.
#pragma once

#include <openssl/evp.h>
#include <xxhash.h>
#include <zstd.h>

#include <memory>

namespace mm {

/// Calls `Free` on a non-null pointer: the deleter of a unique_ptr to a C library's object.
template <auto Free>
struct CDeleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};

using ZstdCCtxPtr = std::unique_ptr<ZSTD_CCtx, CDeleter<ZSTD_freeCCtx>>;       // zstd_codec.h
using ZstdDCtxPtr = std::unique_ptr<ZSTD_DCtx, CDeleter<ZSTD_freeDCtx>>;       // zstd_codec.h
using Xxh3StatePtr = std::unique_ptr<XXH3_state_t, CDeleter<XXH3_freeState>>;  // checksum.h
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, CDeleter<EVP_MD_CTX_free>>;    // checksum.h

}  // namespace mm
