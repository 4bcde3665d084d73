// clean_text.h: the text cleaning of OpenAI CLIP's tokenizer (clip/simple_tokenizer.py,
// github openai/CLIP, MIT):
//
//   whitespace_clean(basic_clean(text)).lower()
//   basic_clean(t)      = html.unescape(html.unescape(ftfy.fix_text(t))).strip()
//   whitespace_clean(t) = regex.sub(r'\s+', ' ', t).strip()
//
// in C++, with the tables of Python's html module and ftfy 6.3.1 (generated into
// clean_tables.inc and mojibake_tables.inc by gen_clean_tables.py): ftfy.fix_text with its
// default configuration, mojibake repair included (mojibake.h).
#pragma once

#include <string>
#include <string_view>

#include "mm/status.h"

namespace mm::pack {

/// Python's html.unescape(text): HTML5 named references (longest prefix without ';'),
/// numeric references with the HTML5 replacements for invalid code points.
std::u32string HtmlUnescape(std::u32string_view text);

/// ftfy.fix_text(text) with ftfy 6.3.1's defaults: per line, HTML entities (unless the text
/// holds '<'), mojibake (mojibake.h), C1 controls as Windows-1252, Latin ligatures,
/// full- and half-width forms, curly quotes, line breaks, terminal escapes, control characters
/// and NFC, repeated until nothing changes. Errors: Internal (ICU).
[[nodiscard]] Result<std::u32string> FtfyFixText(std::u32string_view text);

/// CLIP's cleaning of a caption, as above. Errors: Internal (ICU).
[[nodiscard]] Result<std::u32string> ClipCleanText(std::string_view caption);

}  // namespace mm::pack
