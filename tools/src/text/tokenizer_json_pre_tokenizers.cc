// tokenizer_json_pre_tokenizers.cc: a tokenizer.json's pre-tokenizers (ByteLevel, Split,
// Metaspace, Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, Sequence) as
// function objects that split a caption's pieces, built from their JSON once
// (tokenizer_json_parts.h).
#include <string>
#include <utility>
#include <vector>

#include "text/byte_level.h"
#include "text/regex.h"
#include "text/tokenizer_json_parts.h"
#include "text/unicode_text.h"

namespace mm::pack::tokenizer_json {
namespace {

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

}  // namespace

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

}  // namespace mm::pack::tokenizer_json
