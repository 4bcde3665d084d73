// mm/internal/c_handles.h: one owner per C handle type that mmpack holds, all in one place
// (after llama.cpp's ggml-cpp.h): a one-line deleter and a std::unique_ptr alias each. HDF5's
// integer handles (hid_t) have their move-only owner in mm/internal/h5.h; file descriptors
// theirs in mm/internal/file.h.
//
// Internal (reader/internal/include, through the mm_reader_internal target). Including this
// header links nothing: a deleter's library is linked by the code that creates the handle.
#pragma once

#include <archive.h>
#include <openssl/evp.h>
#include <turbojpeg.h>
#include <xxhash.h>
#include <zstd.h>

#include <memory>

// libvips and GLib are declared here, not included: their headers need GLib's include
// directories, which only the image code has. These are the declarations of <glib.h>
// (gpointer is void*) and <vips/vips.h> (VipsImage is struct _VipsImage).
struct _VipsImage;
extern "C" {
void g_object_unref(void* object);
void g_free(void* memory);
}

namespace mm {

// zstd (compression contexts are per thread; see mm/internal/zstd_codec.h).
struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
};
using ZstdCCtxPtr = std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter>;
struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};
using ZstdDCtxPtr = std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter>;

// xxHash's streaming state (XXH3-64 of a file, mm/internal/checksum.h).
struct Xxh3StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};
using Xxh3StatePtr = std::unique_ptr<XXH3_state_t, Xxh3StateDeleter>;

// OpenSSL's digest context (SHA-256, mm/internal/checksum.h).
struct EvpMdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, EvpMdCtxDeleter>;

// libarchive's reader (WebDataset tars, tools/src/ingest).
struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchiveReadPtr = std::unique_ptr<archive, ArchiveReadDeleter>;

// TurboJPEG's decompressor (tjhandle is void*; tools/src/image).
struct TjHandleDeleter {
  void operator()(void* handle) const { tjDestroy(static_cast<tjhandle>(handle)); }
};
using TjHandlePtr = std::unique_ptr<void, TjHandleDeleter>;

// libvips: an image is a GObject (one reference owned); pixel memory it hands out is g_free'd.
struct VipsImageDeleter {
  void operator()(_VipsImage* image) const { g_object_unref(image); }
};
using VipsImagePtr = std::unique_ptr<_VipsImage, VipsImageDeleter>;
struct GFreeDeleter {
  void operator()(void* memory) const { g_free(memory); }
};
using GMemoryPtr = std::unique_ptr<void, GFreeDeleter>;

}  // namespace mm
