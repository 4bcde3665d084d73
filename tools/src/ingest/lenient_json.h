// lenient_json.h: reading JSON whose text no UTF-8 string can hold, losing only the captions
// that hold the bad text (private to ingest/: the JSONL and COCO readers).
//
// JSON text that no UTF-8 string can hold (RFC 8259 strings are Unicode): a byte that breaks
// UTF-8, or a \u escape of a lone surrogate ("\ud800" with no low half after it, or a low
// half alone). nlohmann::json refuses the whole text for either, which would lose every good
// caption of a COCO file, or a whole JSONL line with a misleading message. NeutralizeJson
// puts a mark in their place so the rest parses; RestoreInvalid turns the mark in a parsed
// caption back into an invalid byte, so that the caption check reports that caption (and
// only that one) as invalid_utf8. The mark is a noncharacter (U+FFFF, U+FFFE, U+FDD0..
// U+FDEF) that the text does not already hold, raw or escaped, so no good caption is hit.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mm::pack {

struct NeutralJson {
  std::string text;
  std::string mark;  // UTF-8 of the mark code point
  bool changed = false;
};

/// `text` with every invalid byte and lone surrogate escape replaced by the mark (`changed`
/// false and `text` as given when there is none).
NeutralJson NeutralizeJson(std::string_view text);

/// NeutralizeJson without holding the result: `text`'s replacement is handed to `sink` piece
/// by piece when it needs one (`changed`); `text` is left empty, and nothing is handed to
/// `sink` when `text` needs no change.
NeutralJson NeutralizeJsonTo(std::string_view text,
                             const std::function<void(std::string_view)>& sink);

/// Where `mark` stands in a parsed string, puts back a byte that is never valid UTF-8.
void RestoreInvalid(std::string* s, const std::string& mark);

}  // namespace mm::pack
