// mm/internal/utf8.h: the one UTF-8 validator of mmpack. Strict RFC 3629: no overlong forms,
// no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Used where text enters (captions,
// manifest paths, lenient JSON) and where it is checked (`mmpack verify`: keys, sources,
// captions).
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/utf8.cc). Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

namespace mm {

/// Byte offset of the first byte that breaks strict UTF-8 (the lead byte of the bad
/// sequence), or std::string_view::npos when `text` is valid.
size_t FirstInvalidUtf8(std::string_view text);

/// True when `text` is valid strict UTF-8.
inline bool IsValidUtf8(std::string_view text) {
  return FirstInvalidUtf8(text) == std::string_view::npos;
}

}  // namespace mm
