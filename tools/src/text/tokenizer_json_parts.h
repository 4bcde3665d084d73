// tokenizer_json_parts.h: what the parts of a tokenizer.json reader share (tokenizer_json.cc,
// tokenizer_json_normalizers.cc, tokenizer_json_pre_tokenizers.cc): the JSON field readers and
// errors, the Unicode classes as the Rust library has them, and the factories of the
// normalizer and pre-tokenizer function objects. Internal to text/.
#pragma once

#include <unicode/uchar.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mm/status.h"

namespace mm::pack::tokenizer_json {

using json = nlohmann::json;
using Pieces = std::vector<std::string>;  // UTF-8 pieces of a caption
using Normalizer = std::function<Result<std::u32string>(std::u32string)>;
using PreTokenizer = std::function<Status(Pieces*)>;

inline Status Bad(const std::string& what) {
  return Status::InvalidArgument("tokenizer.json: " + what);
}
inline Status NotImplemented(const std::string& what, const json& j) {
  return Status::Unsupported("tokenizer.json: " + what + " '" +
                             (j.is_object() && j.contains("type") && j["type"].is_string()
                                  ? j["type"].get<std::string>()
                                  : j.dump().substr(0, 60)) +
                             "' is not implemented (tokenizer_json.h lists what is)");
}

inline std::string TypeOf(const json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
inline bool BoolOr(const json& j, const char* key, bool otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : otherwise;
}
inline std::string StringOr(const json& j, const char* key, const std::string& otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

inline int8_t Category(char32_t c) {
  return static_cast<int8_t>(u_charType(static_cast<UChar32>(c)));
}
inline bool InMask(char32_t c, uint32_t mask) { return (U_MASK(Category(c)) & mask) != 0; }
inline bool IsMark(char32_t c) { return InMask(c, U_GC_M_MASK); }
inline bool IsPunctuation(char32_t c) { return InMask(c, U_GC_P_MASK); }
// BERT's control characters: categories Cc, Cf, Co, Cs. Not Cn: the Rust library's table of
// unassigned code points is empty, so U+FDD0 or U+0378 stay (and become [UNK]).
inline bool IsOther(char32_t c) {
  return InMask(c, U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK);
}
inline bool IsNonspacingMark(char32_t c) { return InMask(c, U_GC_MN_MASK); }
// BERT's punctuation: ASCII punctuation (symbols such as $ + < = > ^ ` | ~ too) or category P.
inline bool IsBertPunctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126) || IsPunctuation(c);
}
inline bool IsCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// The normalizer a tokenizer.json's "normalizer" object describes (Sequence included).
/// Errors: InvalidArgument (malformed), Unsupported (a type tokenizer_json.h does not list).
Result<Normalizer> MakeNormalizer(const json& j);

/// The pre-tokenizer a tokenizer.json's "pre_tokenizer" object describes (Sequence included).
/// Errors: InvalidArgument (malformed), Unsupported (a type tokenizer_json.h does not list).
Result<PreTokenizer> MakePreTokenizer(const json& j);

}  // namespace mm::pack::tokenizer_json
