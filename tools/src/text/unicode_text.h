// unicode_text.h: the Unicode operations the tokenizers share, on code points (std::u32string):
// UTF-8 in and out, ICU's case mapping and normalisation forms, and the white-space sets of the
// regex engines whose behaviour the tokenizers reproduce. ICU's UErrorCode is translated here
// only for these calls.
#pragma once

#include <string>
#include <string_view>

#include "mm/status.h"

namespace mm::pack {

/// The code points of `text` (valid UTF-8: captions are checked before, caption.h); a byte that
/// breaks UTF-8 becomes U+FFFD.
std::u32string DecodeUtf8(std::string_view text);
/// `text` as UTF-8; a surrogate or a value above U+10FFFF becomes U+FFFD.
std::string EncodeUtf8(std::u32string_view text);
void AppendUtf8(char32_t c, std::string* out);

/// Unicode normalisation forms (UAX #15).
enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
/// `text` in normal form `form` (ICU). Errors: Internal (ICU's error name).
[[nodiscard]] Result<std::u32string> Normalize(std::u32string_view text, NormalForm form);
/// ICU's full, locale-independent (root) lowercasing, as Python's str.lower and Rust's
/// str::to_lowercase do ("İ" -> "i̇", final sigma). Errors: Internal.
[[nodiscard]] Result<std::u32string> Lowercase(std::u32string_view text);

/// Python's str.isspace: Unicode White_Space plus U+001C..U+001F (bidi class B or S).
bool IsPythonSpace(char32_t c);
/// Unicode White_Space (what `\s` matches in Python's regex module, Oniguruma and Rust):
/// \t \n \v \f \r, space, U+0085, and the Z categories.
bool IsWhiteSpace(char32_t c);

}  // namespace mm::pack
