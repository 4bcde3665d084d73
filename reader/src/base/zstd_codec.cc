// zstd_codec.cc: see mm/internal/zstd_codec.h.
#include "mm/internal/zstd_codec.h"

#include <string>

#include "mm/internal/c_handles.h"

namespace mm::zstd {

int MinLevel() { return ZSTD_minCLevel(); }
int MaxLevel() { return ZSTD_maxCLevel(); }

Result<std::vector<uint8_t>> Compress(const uint8_t* src, size_t size, int level) {
  thread_local ZstdCCtxPtr ctx(ZSTD_createCCtx());
  if (!ctx) return Status::Internal("ZSTD_createCCtx failed");
  ZSTD_CCtx_reset(ctx.get(), ZSTD_reset_session_and_parameters);
  size_t rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_checksumFlag, 1);
  if (ZSTD_isError(rc)) {
    return Status::InvalidArgument(std::string("zstd parameters: ") + ZSTD_getErrorName(rc));
  }
  std::vector<uint8_t> out(ZSTD_compressBound(size));
  const size_t n = ZSTD_compress2(ctx.get(), out.data(), out.size(), src, size);
  if (ZSTD_isError(n)) {
    return Status::Internal(std::string("ZSTD_compress2: ") + ZSTD_getErrorName(n));
  }
  out.resize(n);
  out.shrink_to_fit();
  return out;
}

uint64_t FrameContentSize(const uint8_t* src, size_t size) {
  const unsigned long long content = ZSTD_getFrameContentSize(src, size);
  if (content == ZSTD_CONTENTSIZE_ERROR) return kNotAFrame;
  if (content == ZSTD_CONTENTSIZE_UNKNOWN) return kUnknownSize;
  return content;
}

Status Decompress(const uint8_t* src, size_t size, uint8_t* dst, size_t expected) {
  thread_local ZstdDCtxPtr dctx(ZSTD_createDCtx());
  if (!dctx) return Status::Internal("ZSTD_createDCtx failed");
  const uint64_t content = FrameContentSize(src, size);
  if (content == kNotAFrame) return Status::Corruption("image chunk is not a zstd frame");
  if (content != expected) {
    return Status::Corruption(
        "zstd frame holds " +
        (content == kUnknownSize ? std::string("an unknown") : std::to_string(content)) +
        " bytes, expected " + std::to_string(expected));
  }
  const size_t got = ZSTD_decompressDCtx(dctx.get(), dst, expected, src, size);
  if (ZSTD_isError(got)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != expected) {
    return Status::Corruption("zstd decoded " + std::to_string(got) + " bytes, expected " +
                              std::to_string(expected));
  }
  return Status::OK();
}

}  // namespace mm::zstd
