// caption.h: whether a caption can be stored and trained on, the caption check of
// `mmpack build` (a sample keeps its good captions; report.json lists the others).
#pragma once

#include <cstdint>
#include <string_view>

namespace mm::pack {

/// The longest caption `mmpack build` keeps by default (--max-caption-bytes), in bytes of
/// UTF-8: 64 KiB, some 200 times a long alt-text or COCO caption and 30 times a dense
/// paragraph-long description. Tokenizing costs memory in proportion to a caption's length
/// (sentencepiece took 2.4 GB for a 10 MB one), so a limit bounds what one sample costs.
constexpr int64_t kDefaultMaxCaptionBytes = int64_t{64} << 10;

/// Why a caption cannot be used: nullptr when it can, else "caption_too_large" (over
/// `max_bytes` bytes; checked first, before the text is read), "empty_caption" (empty or only
/// Unicode White_Space: ASCII space, \t \n \v \f \r, U+0085, U+00A0 NBSP, U+1680,
/// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 ideographic space),
/// "invalid_utf8" (strict UTF-8, mm/internal/utf8.h), or "nul_in_caption" (U+0000: valid
/// UTF-8, but HDF5 strings end at a NUL, so it could not be stored byte-for-byte).
const char* CheckCaption(std::string_view caption, int64_t max_bytes = kDefaultMaxCaptionBytes);

}  // namespace mm::pack
