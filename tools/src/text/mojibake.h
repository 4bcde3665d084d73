// mojibake.h: ftfy's repair of mojibake (ftfy.fix_encoding, ftfy 6.3.1 with its default
// configuration; github rspeer/python-ftfy, Apache-2.0), part of CLIP's caption cleaning
// (clean_text.h): text that was UTF-8 decoded as a single-byte encoding ("cafÃ©") is encoded
// back and decoded as UTF-8 ("café").
//
// It acts only on text that ftfy's badness expression flags, tries ftfy's single-byte
// encodings in ftfy's order (Latin-1, the "sloppy" Windows code pages, ISO 8859-2, Mac Roman,
// CP437) with its byte repairs (restore_byte_a0, replace_lossy_sequences, CESU-8 and Java's
// C0 80 through utf-8-variants), then decode_inconsistent_utf8, the Latin-1 -> Windows-1252
// fallback and fix_c1_controls, repeating until nothing changes. Tables and expressions are
// ftfy's, generated into mojibake_tables.inc (gen_clean_tables.py mojibake).
#pragma once

#include <string>

#include "mm/status.h"

namespace mm::pack {

/// ftfy.fix_encoding(text). Thread-safe. Errors: Internal (a regular expression failed).
[[nodiscard]] Result<std::u32string> FixEncoding(std::u32string text);

}  // namespace mm::pack
