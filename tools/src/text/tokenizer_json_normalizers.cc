// tokenizer_json_normalizers.cc: a tokenizer.json's normalizers (BertNormalizer, Replace,
// NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Prepend, Sequence) as function objects
// over UTF-32 text, built from their JSON once (tokenizer_json_parts.h).
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <string>
#include <utility>
#include <vector>

#include "text/regex.h"
#include "text/tokenizer_json_parts.h"
#include "text/unicode_text.h"

namespace mm::pack::tokenizer_json {
namespace {

// Rust's char::to_lowercase, one character at a time (no final-sigma context).
std::u32string LowercaseChars(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
      continue;
    }
    icu::UnicodeString one(static_cast<UChar32>(c));
    one.toLower(icu::Locale::getRoot());
    for (int32_t i = 0; i < one.length();) {
      const UChar32 l = one.char32At(i);
      out.push_back(static_cast<char32_t>(l));
      i += U16_LENGTH(l);
    }
  }
  return out;
}

std::u32string StripMarks(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : text) {
    if (!IsMark(c)) out.push_back(c);
  }
  return out;
}

Result<Normalizer> MakeBertNormalizer(const json& j) {
  const bool clean = BoolOr(j, "clean_text", true);
  const bool chinese = BoolOr(j, "handle_chinese_chars", true);
  const bool lowercase = BoolOr(j, "lowercase", true);
  const bool strip = BoolOr(j, "strip_accents", lowercase);  // null: as lowercase
  return Normalizer([=](std::u32string text) -> Result<std::u32string> {
    std::u32string out;
    out.reserve(text.size());
    for (char32_t c : text) {
      if (clean) {
        const bool special_space = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == 0xFFFD || (!special_space && IsOther(c))) continue;
        if (special_space || IsWhiteSpace(c)) c = ' ';
      }
      if (chinese && IsCjk(c)) {
        out.push_back(' ');
        out.push_back(c);
        out.push_back(' ');
      } else {
        out.push_back(c);
      }
    }
    if (strip) {  // BertNormalizer strips Mn only (StripAccents strips every mark)
      MM_ASSIGN_OR_RETURN(out, Normalize(out, NormalForm::kNfd));
      out.erase(std::remove_if(out.begin(), out.end(), IsNonspacingMark), out.end());
    }
    if (lowercase) out = LowercaseChars(out);
    return out;
  });
}

Result<Normalizer> MakeReplace(const json& j) {
  const std::string content = StringOr(j, "content", "");
  const json pattern = j.value("pattern", json::object());
  std::string regex;
  if (pattern.contains("String") && pattern["String"].is_string()) {
    const std::string literal = pattern["String"].get<std::string>();
    if (literal.empty()) return Bad("Replace with an empty pattern");
    regex = "\\Q" + literal + "\\E";
  } else if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = pattern["Regex"].get<std::string>();
  } else {
    return Bad("Replace without a String or Regex pattern");
  }
  MM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(regex));
  return Normalizer([re, content](std::u32string text) -> Result<std::u32string> {
    const std::string s = EncodeUtf8(text);
    std::vector<std::pair<size_t, size_t>> m;
    MM_RETURN_NOT_OK(re.FindAll(s, &m));
    if (m.empty()) return text;
    std::string out;
    size_t at = 0;
    for (const auto& [b, e] : m) {
      out.append(s, at, b - at);
      out += content;
      at = e;
    }
    out.append(s, at, std::string::npos);
    return DecodeUtf8(out);
  });
}

}  // namespace

Result<Normalizer> MakeNormalizer(const json& j) {
  if (j.is_null()) return Normalizer([](std::u32string t) -> Result<std::u32string> { return t; });
  const std::string type = TypeOf(j);
  const std::pair<const char*, NormalForm> forms[] = {{"NFC", NormalForm::kNfc},
                                                      {"NFD", NormalForm::kNfd},
                                                      {"NFKC", NormalForm::kNfkc},
                                                      {"NFKD", NormalForm::kNfkd}};
  for (const auto& [name, form] : forms) {
    if (type == name) {
      const NormalForm f = form;
      return Normalizer([f](std::u32string t) { return Normalize(t, f); });
    }
  }
  if (type == "Lowercase") {
    return Normalizer([](std::u32string t) -> Result<std::u32string> { return LowercaseChars(t); });
  }
  if (type == "StripAccents") {
    return Normalizer([](std::u32string t) -> Result<std::u32string> { return StripMarks(t); });
  }
  if (type == "BertNormalizer") return MakeBertNormalizer(j);
  if (type == "Replace") return MakeReplace(j);
  if (type == "Strip") {
    const bool left = BoolOr(j, "strip_left", true), right = BoolOr(j, "strip_right", true);
    return Normalizer([left, right](std::u32string t) -> Result<std::u32string> {
      size_t b = 0, e = t.size();
      while (left && b < e && IsWhiteSpace(t[b])) ++b;
      while (right && e > b && IsWhiteSpace(t[e - 1])) --e;
      return t.substr(b, e - b);
    });
  }
  if (type == "Prepend") {
    const std::u32string prefix = DecodeUtf8(StringOr(j, "prepend", ""));
    return Normalizer([prefix](std::u32string t) -> Result<std::u32string> {
      return t.empty() ? t : prefix + t;
    });
  }
  if (type == "Sequence") {
    std::vector<Normalizer> steps;
    for (const json& n : j.value("normalizers", json::array())) {
      MM_ASSIGN_OR_RETURN(Normalizer step, MakeNormalizer(n));
      steps.push_back(std::move(step));
    }
    return Normalizer([steps](std::u32string t) -> Result<std::u32string> {
      for (const Normalizer& step : steps) {
        MM_ASSIGN_OR_RETURN(t, step(std::move(t)));
      }
      return t;
    });
  }
  return NotImplemented("normalizer", j);
}

}  // namespace mm::pack::tokenizer_json
