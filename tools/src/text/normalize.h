// normalize.h: what `mmpack build` does to a caption before tokenizing it (--lowercase,
// --normalize). Captions are stored byte-for-byte as the input gave them; only the text fed
// to the tokenizer (and to tokenizer training) is normalised, and index.json records how
// ("text": {"lowercase": .., "normalize": ..}, schemas/FORMAT.md) so that readers and the
// trainer know what the token ids mean.
//
// Unicode: ICU 72 (Debian's libicu). NFKC is Unicode Standard Annex #15's compatibility
// composition (full-width letters become ASCII, ligatures split, "①" becomes "1");
// lowercasing is ICU's full, locale-independent (root locale) case mapping, so "Ä" -> "ä"
// and "ΣΑ" -> "σα" as well as "A" -> "a". NFKC runs first, then lowercasing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mm/status.h"

namespace mm::pack {

/// Unicode normalisation before tokenizing; part of index.json ("text.normalize").
enum class TextNormalization {
  kNone,  // "none": the caption's code points as given
  kNfkc,  // "nfkc": Unicode NFKC (UAX #15)
};
constexpr std::string_view ToString(TextNormalization n) {
  return n == TextNormalization::kNfkc ? "nfkc" : "none";
}
inline constexpr TextNormalization kTextNormalizations[] = {TextNormalization::kNone,
                                                            TextNormalization::kNfkc};
/// The normalisation named `text` ("none" | "nfkc"); nullopt for anything else.
constexpr std::optional<TextNormalization> ParseTextNormalization(std::string_view text) {
  for (TextNormalization n : kTextNormalizations) {
    if (text == ToString(n)) return n;
  }
  return std::nullopt;
}

struct TextOptions {
  bool lowercase = false;
  TextNormalization normalize = TextNormalization::kNone;

  bool identity() const { return !lowercase && normalize == TextNormalization::kNone; }
};

/// The text the tokenizer sees for `caption` (valid UTF-8, checked by caption.h): NFKC when
/// asked, then lowercased when asked; `caption` itself when `options.identity()`.
/// Thread-safe (ICU's normalizer instances are immutable and shared).
/// Errors: Internal (ICU's error name), e.g. when ICU's data cannot be loaded.
[[nodiscard]] Result<std::string> NormalizeForTokenizer(std::string_view caption,
                                                        const TextOptions& options);

}  // namespace mm::pack
