// tokenizer_json.cc: see tokenizer_json.h. Each component is a small function object built
// from its JSON once; Encode runs them in the library's order.
#include "text/tokenizer_json.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/regex.h"
#include "text/unicode_text.h"

namespace mm::pack {
namespace {

using json = nlohmann::json;
using Pieces = std::vector<std::string>;  // UTF-8 pieces of a caption
using Normalizer = std::function<Result<std::u32string>(std::u32string)>;
using PreTokenizer = std::function<Status(Pieces*)>;

Status Bad(const std::string& what) { return Status::InvalidArgument("tokenizer.json: " + what); }
Status NotImplemented(const std::string& what, const json& j) {
  return Status::Unsupported("tokenizer.json: " + what + " '" +
                             (j.is_object() && j.contains("type") && j["type"].is_string()
                                  ? j["type"].get<std::string>()
                                  : j.dump().substr(0, 60)) +
                             "' is not implemented (tokenizer_json.h lists what is)");
}

std::string TypeOf(const json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool BoolOr(const json& j, const char* key, bool otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : otherwise;
}
std::string StringOr(const json& j, const char* key, const std::string& otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

int8_t Category(char32_t c) { return static_cast<int8_t>(u_charType(static_cast<UChar32>(c))); }
bool InMask(char32_t c, uint32_t mask) { return (U_MASK(Category(c)) & mask) != 0; }
bool IsMark(char32_t c) { return InMask(c, U_GC_M_MASK); }
bool IsPunctuation(char32_t c) { return InMask(c, U_GC_P_MASK); }
// BERT's control characters: categories Cc, Cf, Co, Cs. Not Cn: the Rust library's table of
// unassigned code points is empty, so U+FDD0 or U+0378 stay (and become [UNK]).
bool IsOther(char32_t c) {
  return InMask(c, U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK);
}
bool IsNonspacingMark(char32_t c) { return InMask(c, U_GC_MN_MASK); }
// BERT's punctuation: ASCII punctuation (symbols such as $ + < = > ^ ` | ~ too) or category P.
bool IsBertPunctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126) || IsPunctuation(c);
}
bool IsCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

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

// ---- normalizers -------------------------------------------------------------------------

Result<Normalizer> MakeNormalizer(const json& j);

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

// ---- pre-tokenizers ----------------------------------------------------------------------

// How a split treats its delimiters (tokenizers' SplitDelimiterBehavior).
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Result<Behavior> ParseBehavior(const json& j, Behavior otherwise) {
  auto it = j.find("behavior");
  if (it == j.end() || !it->is_string()) return otherwise;
  const std::string b = it->get<std::string>();
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return Bad("split behavior '" + b + "'");
}

// `piece` cut at `spans` ([begin, end) byte ranges, true for a delimiter) as `behavior` says;
// empty pieces are dropped.
void SplitSpans(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                bool invert, Behavior behavior, Pieces* out) {
  std::vector<std::tuple<size_t, size_t, bool>> spans;  // begin, end, is delimiter
  size_t at = 0;
  for (const auto& [b, e] : matches) {
    if (b > at) spans.emplace_back(at, b, invert);
    spans.emplace_back(b, e, !invert);
    at = e;
  }
  if (at < piece.size()) spans.emplace_back(at, piece.size(), invert);
  std::vector<std::string> parts;
  bool last_was_delimiter = false;
  std::string pending;  // kMergedWithNext: delimiters waiting for the next piece
  for (const auto& [b, e, delim] : spans) {
    const std::string s = piece.substr(b, e - b);
    switch (behavior) {
      case Behavior::kRemoved:
        if (!delim) parts.push_back(s);
        break;
      case Behavior::kIsolated:
        parts.push_back(s);
        break;
      case Behavior::kMergedWithPrevious:
        if (delim && !parts.empty() && !last_was_delimiter) {
          parts.back() += s;
        } else {
          parts.push_back(s);
        }
        break;
      case Behavior::kMergedWithNext:
        if (delim) {
          pending += s;
        } else {
          parts.push_back(pending + s);
          pending.clear();
        }
        break;
      case Behavior::kContiguous:
        if (delim && last_was_delimiter && !parts.empty()) {
          parts.back() += s;
        } else {
          parts.push_back(s);
        }
        break;
    }
    last_was_delimiter = delim;
  }
  if (!pending.empty()) parts.push_back(pending);
  for (std::string& p : parts) {
    if (!p.empty()) out->push_back(std::move(p));
  }
}

PreTokenizer RegexSplit(Regex re, bool invert, Behavior behavior) {
  return [re, invert, behavior](Pieces* pieces) -> Status {
    Pieces out;
    std::vector<std::pair<size_t, size_t>> m;
    for (const std::string& p : *pieces) {
      MM_RETURN_NOT_OK(re.FindAll(p, &m));
      SplitSpans(p, m, invert, behavior, &out);
    }
    *pieces = std::move(out);
    return Status::OK();
  };
}

// A split on single characters that `is_delimiter` picks.
PreTokenizer CharSplit(std::function<bool(char32_t)> is_delimiter, Behavior behavior) {
  return [is_delimiter, behavior](Pieces* pieces) -> Status {
    Pieces out;
    std::vector<std::pair<size_t, size_t>> m;
    for (const std::string& p : *pieces) {
      m.clear();
      size_t byte = 0;
      for (char32_t c : DecodeUtf8(p)) {
        std::string one;
        AppendUtf8(c, &one);
        if (is_delimiter(c)) m.emplace_back(byte, byte + one.size());
        byte += one.size();
      }
      SplitSpans(p, m, false, behavior, &out);
    }
    *pieces = std::move(out);
    return Status::OK();
  };
}

// Oniguruma's \w and \s (what the Rust library's regexes mean by them), for PCRE2: \w is
// UTS #18's word class (Alphabetic, marks, decimal digits, connector punctuation and the
// joiners U+200C/U+200D), \s Unicode White_Space.
std::string OnigClasses(std::string_view pattern) {
  const std::string w = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
  const std::string s(kWhiteSpaceClass);
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 'w' || n == 's') {
        out += in_class ? (n == 'w' ? w : s) : "[" + (n == 'w' ? w : s) + "]";
      } else if ((n == 'W' || n == 'S') && !in_class) {
        out += "[^" + (n == 'W' ? w : s) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

Result<PreTokenizer> MakePreTokenizer(const json& j);

Result<PreTokenizer> MakeByteLevel(const json& j) {
  const bool prefix = BoolOr(j, "add_prefix_space", true);
  const bool use_regex = BoolOr(j, "use_regex", true);
  MM_ASSIGN_OR_RETURN(
      Regex re, Regex::Compile(
                    OnigClasses("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
                                "\\s+(?!\\S)|\\s+")));
  return PreTokenizer([=](Pieces* pieces) -> Status {
    const ByteLevelMap& map = GetByteLevelMap();
    Pieces out;
    std::vector<std::pair<size_t, size_t>> m;
    for (std::string p : *pieces) {
      if (prefix && (p.empty() || p[0] != ' ')) p = " " + p;
      Pieces words;
      if (use_regex) {
        MM_RETURN_NOT_OK(re.FindAll(p, &m));
        SplitSpans(p, m, false, Behavior::kIsolated, &words);
      } else {
        words.push_back(p);
      }
      for (const std::string& w : words) {
        std::string mapped;
        for (unsigned char b : w) mapped += map.utf8[b];
        out.push_back(std::move(mapped));
      }
    }
    *pieces = std::move(out);
    return Status::OK();
  });
}

Result<PreTokenizer> MakeSplit(const json& j) {
  const json pattern = j.value("pattern", json::object());
  std::string regex;
  if (pattern.contains("String") && pattern["String"].is_string()) {
    regex = "\\Q" + pattern["String"].get<std::string>() + "\\E";
  } else if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = OnigClasses(pattern["Regex"].get<std::string>());
  } else {
    return Bad("Split without a String or Regex pattern");
  }
  MM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(regex));
  MM_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(j, Behavior::kIsolated));
  return RegexSplit(re, BoolOr(j, "invert", false), behavior);
}

Result<PreTokenizer> MakeMetaspace(const json& j) {
  const std::string replacement = StringOr(j, "replacement", "\xE2\x96\x81");
  const std::string scheme =
      StringOr(j, "prepend_scheme", BoolOr(j, "add_prefix_space", true) ? "always" : "never");
  const bool split = BoolOr(j, "split", true);
  if (scheme != "always" && scheme != "first" && scheme != "never") {
    return Bad("Metaspace prepend_scheme '" + scheme + "'");
  }
  MM_ASSIGN_OR_RETURN(Regex re, Regex::Compile("\\Q" + replacement + "\\E"));
  return PreTokenizer([=](Pieces* pieces) -> Status {
    Pieces out;
    std::vector<std::pair<size_t, size_t>> m;
    for (size_t i = 0; i < pieces->size(); ++i) {
      std::string p;
      for (char c : (*pieces)[i]) {
        if (c == ' ') {
          p += replacement;
        } else {
          p += c;
        }
      }
      const bool first = i == 0;
      if ((scheme == "always" || (scheme == "first" && first)) &&
          p.compare(0, replacement.size(), replacement) != 0) {
        p = replacement + p;
      }
      if (split) {
        MM_RETURN_NOT_OK(re.FindAll(p, &m));
        SplitSpans(p, m, false, Behavior::kMergedWithNext, &out);
      } else if (!p.empty()) {
        out.push_back(std::move(p));
      }
    }
    *pieces = std::move(out);
    return Status::OK();
  });
}

Result<PreTokenizer> MakePreTokenizer(const json& j) {
  if (j.is_null()) return PreTokenizer([](Pieces*) { return Status::OK(); });
  const std::string type = TypeOf(j);
  if (type == "ByteLevel") return MakeByteLevel(j);
  if (type == "Whitespace") {
    MM_ASSIGN_OR_RETURN(Regex re, Regex::Compile(OnigClasses("\\w+|[^\\w\\s]+")));
    return RegexSplit(re, /*invert=*/true, Behavior::kRemoved);
  }
  if (type == "WhitespaceSplit") return CharSplit(IsWhiteSpace, Behavior::kRemoved);
  if (type == "BertPreTokenizer") {
    PreTokenizer space = CharSplit(IsWhiteSpace, Behavior::kRemoved);
    PreTokenizer punct = CharSplit(IsBertPunctuation, Behavior::kIsolated);
    return PreTokenizer([space, punct](Pieces* p) -> Status {
      MM_RETURN_NOT_OK(space(p));
      return punct(p);
    });
  }
  if (type == "Punctuation") {
    MM_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(j, Behavior::kIsolated));
    return CharSplit(IsBertPunctuation, behavior);
  }
  if (type == "Digits") {
    const bool individual = BoolOr(j, "individual_digits", false);
    return CharSplit([](char32_t c) { return InMask(c, U_GC_N_MASK); },
                     individual ? Behavior::kIsolated : Behavior::kContiguous);
  }
  if (type == "Split") return MakeSplit(j);
  if (type == "Metaspace") return MakeMetaspace(j);
  if (type == "Sequence") {
    std::vector<PreTokenizer> steps;
    for (const json& p : j.value("pretokenizers", json::array())) {
      MM_ASSIGN_OR_RETURN(PreTokenizer step, MakePreTokenizer(p));
      steps.push_back(std::move(step));
    }
    return PreTokenizer([steps](Pieces* p) -> Status {
      for (const PreTokenizer& step : steps) MM_RETURN_NOT_OK(step(p));
      return Status::OK();
    });
  }
  return NotImplemented("pre_tokenizer", j);
}

}  // namespace

// ---- the whole --------------------------------------------------------------------------

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false;
};

struct TokenizerJson::Impl {
  std::vector<AddedToken> added;
  Normalizer normalizer;
  std::vector<PreTokenizer> pre_tokenizer;  // one, or none
  // The model.
  bool wordpiece = false;
  std::unordered_map<std::string, int32_t> vocab;
  BpeMerges merges;
  std::optional<int32_t> model_unk;  // the model's unk_token id
  std::string prefix, suffix;        // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  int max_chars = 100;                 // WordPiece max_input_chars_per_word
  std::vector<int32_t> before, after;  // the post-processor's specials

  Status Model(const std::string& word, std::vector<int32_t>* ids) const;
  Status Bpe(const std::string& word, std::vector<int32_t>* ids) const;
  Status WordPiece(const std::string& word, std::vector<int32_t>* ids) const;
  Status Text(std::string_view text, bool normalized_tokens_only, std::vector<int32_t>* ids) const;
};

namespace {

bool IsWordChar(char32_t c) { return c == '_' || InMask(c, U_GC_L_MASK | U_GC_N_MASK); }

// The added tokens of `tokens` in `text`: leftmost-longest, non-overlapping, as tokenizers'
// AddedVocabulary::find_matches: (token index or -1 for text, begin, end).
std::vector<std::tuple<int, size_t, size_t>> FindAdded(
    std::string_view text, const std::vector<const AddedToken*>& tokens) {
  std::vector<std::tuple<int, size_t, size_t>> out;
  size_t done = 0;
  size_t from = 0;
  while (from < text.size()) {
    int best = -1;
    size_t best_at = std::string_view::npos, best_len = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::string& c = tokens[t]->content;
      if (c.empty()) continue;
      const size_t at = text.find(c, from);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && c.size() > best_len)) {
        best = static_cast<int>(t);
        best_at = at;
        best_len = c.size();
      }
    }
    if (best < 0) break;
    size_t begin = best_at, end = best_at + best_len;
    from = end;
    const AddedToken& tok = *tokens[best];
    if (tok.single_word) {
      const std::u32string before = DecodeUtf8(text.substr(0, begin));
      const std::u32string after = DecodeUtf8(text.substr(end));
      if ((!before.empty() && IsWordChar(before.back())) ||
          (!after.empty() && IsWordChar(after.front()))) {
        continue;
      }
    }
    if (tok.lstrip) {
      const std::u32string before = DecodeUtf8(text.substr(0, begin));
      size_t n = before.size();
      while (n > 0 && IsWhiteSpace(before[n - 1])) --n;
      const size_t strip_begin = EncodeUtf8(std::u32string_view(before).substr(0, n)).size();
      begin = std::max(strip_begin, done);
    }
    if (tok.rstrip) {
      const std::u32string after = DecodeUtf8(text.substr(end));
      size_t n = 0;
      while (n < after.size() && IsWhiteSpace(after[n])) ++n;
      end += EncodeUtf8(std::u32string_view(after).substr(0, n)).size();
      from = end;
    }
    if (begin > done) out.emplace_back(-1, done, begin);
    out.emplace_back(best, begin, end);
    done = end;
  }
  if (done < text.size()) out.emplace_back(-1, done, text.size());
  return out;
}

}  // namespace

Status TokenizerJson::Impl::Bpe(const std::string& word, std::vector<int32_t>* ids) const {
  if (ignore_merges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      ids->push_back(it->second);
      return Status::OK();
    }
  }
  std::vector<int32_t> w;
  std::optional<int32_t> unk;  // a pending unknown (fuse_unk joins a run of them)
  const std::u32string chars = DecodeUtf8(word);
  for (size_t i = 0; i < chars.size(); ++i) {
    std::string s;
    AppendUtf8(chars[i], &s);
    const std::string raw = s;
    if (i > 0) s = prefix + s;
    if (i + 1 == chars.size()) s += suffix;
    auto it = vocab.find(s);
    if (it != vocab.end()) {
      if (unk) w.push_back(*unk);
      unk.reset();
      w.push_back(it->second);
      continue;
    }
    if (byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        auto bt = vocab.find(name);
        if (bt == vocab.end()) break;
        bytes.push_back(bt->second);
      }
      if (bytes.size() == s.size()) {
        w.insert(w.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (model_unk) {
      if (unk && !fuse_unk) w.push_back(*unk);
      unk = *model_unk;
    }
  }
  if (unk) w.push_back(*unk);
  merges.Apply(&w);
  ids->insert(ids->end(), w.begin(), w.end());
  return Status::OK();
}

Status TokenizerJson::Impl::WordPiece(const std::string& word, std::vector<int32_t>* ids) const {
  const std::u32string chars = DecodeUtf8(word);
  if (static_cast<int>(chars.size()) > max_chars) {
    ids->push_back(*model_unk);
    return Status::OK();
  }
  std::vector<int32_t> sub;
  size_t start = 0;  // in characters
  while (start < chars.size()) {
    size_t end = chars.size();
    std::optional<int32_t> found;
    while (start < end) {
      std::string s = EncodeUtf8(std::u32string_view(chars).substr(start, end - start));
      if (start > 0) s = prefix + s;
      auto it = vocab.find(s);
      if (it != vocab.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (!found) {
      ids->push_back(*model_unk);
      return Status::OK();
    }
    sub.push_back(*found);
    start = end;
  }
  ids->insert(ids->end(), sub.begin(), sub.end());
  return Status::OK();
}

Status TokenizerJson::Impl::Model(const std::string& word, std::vector<int32_t>* ids) const {
  return wordpiece ? WordPiece(word, ids) : Bpe(word, ids);
}

// Normalised text (after the unnormalized added tokens are out): the normalized added tokens
// split out, then each piece normalised, pre-tokenized and modelled.
Status TokenizerJson::Impl::Text(std::string_view text, bool /*unused*/,
                                 std::vector<int32_t>* ids) const {
  MM_ASSIGN_OR_RETURN(std::u32string normal, normalizer(DecodeUtf8(text)));
  const std::string n = EncodeUtf8(normal);
  std::vector<const AddedToken*> normalized;
  for (const AddedToken& t : added) {
    if (t.normalized) normalized.push_back(&t);
  }
  for (const auto& [t, b, e] : FindAdded(n, normalized)) {
    if (t >= 0) {
      ids->push_back(normalized[t]->id);
      continue;
    }
    Pieces pieces = {n.substr(b, e - b)};
    for (const PreTokenizer& p : pre_tokenizer) MM_RETURN_NOT_OK(p(&pieces));
    for (const std::string& w : pieces) MM_RETURN_NOT_OK(Model(w, ids));
  }
  return Status::OK();
}

TokenizerJson::TokenizerJson() : impl_(std::make_unique<Impl>()) {}
TokenizerJson::~TokenizerJson() = default;

namespace {

// The specials the post-processor puts around a single sequence.
Status PostProcessor(const json& j, const std::unordered_map<std::string, int32_t>& ids,
                     std::vector<int32_t>* before, std::vector<int32_t>* after) {
  if (j.is_null()) return Status::OK();
  const std::string type = TypeOf(j);
  auto pair_id = [&](const char* key) -> Result<int32_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return Bad(type + "." + key + " is not [token, id]");
    }
    return (*it)[1].get<int32_t>();
  };
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    MM_ASSIGN_OR_RETURN(int32_t cls, pair_id("cls"));
    MM_ASSIGN_OR_RETURN(int32_t sep, pair_id("sep"));
    before->insert(before->begin(), cls);
    after->push_back(sep);
    return Status::OK();
  }
  if (type == "ByteLevel") return Status::OK();
  if (type == "TemplateProcessing") {
    const json single = j.value("single", json::array());
    const json specials = j.value("special_tokens", json::object());
    std::vector<int32_t> b, a;
    bool seen_sequence = false;
    for (const json& piece : single) {
      if (piece.contains("Sequence")) {
        if (seen_sequence) return Bad("TemplateProcessing.single with two sequences");
        seen_sequence = true;
        continue;
      }
      if (!piece.contains("SpecialToken")) return Bad("TemplateProcessing.single piece");
      const std::string name = StringOr(piece["SpecialToken"], "id", "");
      auto sp = specials.find(name);
      if (sp == specials.end() || !sp->contains("ids") || !(*sp)["ids"].is_array()) {
        return Bad("TemplateProcessing special token '" + name + "' without ids");
      }
      for (const json& id : (*sp)["ids"]) (seen_sequence ? a : b).push_back(id.get<int32_t>());
    }
    before->insert(before->begin(), b.begin(), b.end());
    after->insert(after->end(), a.begin(), a.end());
    return Status::OK();
  }
  if (type == "Sequence") {
    for (const json& p : j.value("processors", json::array())) {
      MM_RETURN_NOT_OK(PostProcessor(p, ids, before, after));
    }
    return Status::OK();
  }
  return NotImplemented("post_processor", j);
}

// merges as ["a b", ...] or [["a", "b"], ...].
Result<std::vector<std::pair<std::string, std::string>>> ParseMerges(const json& model) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Bad("merge '" + s + "' is not two tokens");
      }
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad("a merge is neither \"a b\" nor [a, b]");
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<TokenizerJson>> TokenizerJson::FromSerialized(std::string json_bytes) {
  json doc = json::parse(json_bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("not a JSON object");
  std::unique_ptr<TokenizerJson> t(new TokenizerJson());
  Impl& m = *t->impl_;
  const json model = doc.value("model", json());
  if (!model.is_object() || !model.contains("vocab") || !model["vocab"].is_object()) {
    return Bad("no model with a vocab");
  }
  std::string type = TypeOf(model);
  if (type.empty()) type = model.contains("merges") ? "BPE" : "WordPiece";
  if (type != "BPE" && type != "WordPiece") return NotImplemented("model", model);
  m.wordpiece = type == "WordPiece";
  int32_t max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return Bad("vocab id of '" + it.key() + "'");
    const int32_t id = it.value().get<int32_t>();
    if (id < 0) return Bad("negative vocab id of '" + it.key() + "'");
    m.vocab[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  std::unordered_map<std::string, int32_t> by_content = m.vocab;
  for (const json& a : doc.value("added_tokens", json::array())) {
    AddedToken tok;
    if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string()) {
      return Bad("an added token without id and content");
    }
    tok.id = a["id"].get<int32_t>();
    tok.content = a["content"].get<std::string>();
    tok.single_word = BoolOr(a, "single_word", false);
    tok.lstrip = BoolOr(a, "lstrip", false);
    tok.rstrip = BoolOr(a, "rstrip", false);
    tok.normalized = BoolOr(a, "normalized", !BoolOr(a, "special", false));
    max_id = std::max(max_id, tok.id);
    by_content[tok.content] = tok.id;
    m.added.push_back(std::move(tok));
  }
  const std::string unk = StringOr(model, "unk_token", "");
  if (!unk.empty()) {
    auto it = m.vocab.find(unk);
    if (it == m.vocab.end()) return Bad("unk_token '" + unk + "' is not in the vocab");
    m.model_unk = it->second;
  }
  if (m.wordpiece) {
    if (!m.model_unk) return Bad("a WordPiece model without unk_token");
    m.prefix = StringOr(model, "continuing_subword_prefix", "##");
    m.max_chars = model.value("max_input_chars_per_word", 100);
  } else {
    m.prefix = StringOr(model, "continuing_subword_prefix", "");
    m.suffix = StringOr(model, "end_of_word_suffix", "");
    m.fuse_unk = BoolOr(model, "fuse_unk", false);
    m.byte_fallback = BoolOr(model, "byte_fallback", false);
    m.ignore_merges = BoolOr(model, "ignore_merges", false);
    if (model.contains("dropout") && model["dropout"].is_number() &&
        model["dropout"].get<double>() > 0) {
      return Status::Unsupported("tokenizer.json: BPE dropout (random merges) is not repeatable");
    }
    MM_ASSIGN_OR_RETURN(auto merges, ParseMerges(model));
    for (size_t r = 0; r < merges.size(); ++r) {
      const auto& [a, b] = merges[r];
      auto ia = m.vocab.find(a), ib = m.vocab.find(b);
      const std::string joined = a + b.substr(std::min(m.prefix.size(), b.size()));
      auto ij = m.vocab.find(joined);
      if (ia == m.vocab.end() || ib == m.vocab.end() || ij == m.vocab.end()) {
        return Bad("merge '" + a + " " + b + "' of tokens outside the vocab");
      }
      m.merges.Add(ia->second, ib->second, ij->second, static_cast<int32_t>(r));
    }
  }
  MM_ASSIGN_OR_RETURN(m.normalizer, MakeNormalizer(doc.value("normalizer", json())));
  MM_ASSIGN_OR_RETURN(PreTokenizer pre, MakePreTokenizer(doc.value("pre_tokenizer", json())));
  m.pre_tokenizer.push_back(std::move(pre));
  MM_RETURN_NOT_OK(
      PostProcessor(doc.value("post_processor", json()), by_content, &m.before, &m.after));
  for (int32_t id : m.before) max_id = std::max(max_id, id);
  for (int32_t id : m.after) max_id = std::max(max_id, id);

  t->vocab_size_ = max_id + 1;
  t->bos_id_ = m.before.empty() ? -1 : m.before.front();
  t->eos_id_ = m.after.empty() ? -1 : m.after.back();
  auto named = [&](std::initializer_list<const char*> names) -> std::optional<int32_t> {
    for (const char* n : names) {
      auto it = by_content.find(n);
      if (it != by_content.end()) return it->second;
    }
    return std::nullopt;
  };
  // unk: the model's; else the added token the library's tokenizer classes call unk_token;
  // else (byte-level BPE: nothing is unknown) eos, as GPT-2's class does; else 0.
  std::optional<int32_t> unk_id = m.model_unk;
  if (!unk_id) unk_id = named({"<unk>", "[UNK]", "<|unk|>"});
  if (!unk_id && t->eos_id_ >= 0) unk_id = t->eos_id_;
  t->unk_id_ = unk_id.value_or(0);
  std::optional<int32_t> pad;
  const json padding = doc.value("padding", json());
  if (padding.is_object() && padding.contains("pad_id") && padding["pad_id"].is_number_integer()) {
    pad = padding["pad_id"].get<int32_t>();
  }
  if (!pad) pad = named({"<pad>", "[PAD]", "<|pad|>", "<|padding|>"});
  t->pad_id_ = pad.value_or(t->unk_id_);
  if (t->pad_id_ < 0 || t->pad_id_ >= t->vocab_size_) t->pad_id_ = t->unk_id_;
  t->model_bytes_ = std::move(json_bytes);
  return t;
}

Result<std::vector<int32_t>> TokenizerJson::EncodePieces(std::string_view caption) const {
  const Impl& m = *impl_;
  std::vector<const AddedToken*> raw;
  for (const AddedToken& tok : m.added) {
    if (!tok.normalized) raw.push_back(&tok);
  }
  std::vector<int32_t> ids;
  for (const auto& [t, b, e] : FindAdded(caption, raw)) {
    if (t >= 0) {
      ids.push_back(raw[t]->id);
    } else {
      MM_RETURN_NOT_OK(m.Text(caption.substr(b, e - b), false, &ids));
    }
  }
  return ids;
}

Result<TokenizedCaption> TokenizerJson::Encode(std::string_view caption, int max_tokens) const {
  MM_ASSIGN_OR_RETURN(std::vector<int32_t> pieces, EncodePieces(caption));
  return AssembleCaption(impl_->before, std::move(pieces), impl_->after, max_tokens,
                         impl_->model_unk.value_or(-1));
}

}  // namespace mm::pack
