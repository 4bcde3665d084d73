// caption.h: whether a caption can be stored and trained on, the caption check of
// `mmpack build` (a sample keeps its good captions; report.json lists the others).
#pragma once

#include <string_view>

namespace mm::pack {

/// Why a caption cannot be used: nullptr when it can, else "empty_caption" (empty or only
/// Unicode White_Space: ASCII space, \t \n \v \f \r, U+0085, U+00A0 NBSP, U+1680,
/// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 ideographic space),
/// "invalid_utf8" (strict UTF-8, mm/internal/utf8.h), or "nul_in_caption" (U+0000: valid
/// UTF-8, but HDF5 strings end at a NUL, so it could not be stored byte-for-byte).
const char* CheckCaption(std::string_view caption);

}  // namespace mm::pack
