// clean_text.cc: see clean_text.h.
#include "text/clean_text.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <iterator>

#include "text/mojibake.h"
#include "text/unicode_text.h"

namespace mm::pack {
namespace {

struct TextPair {
  const char* key;
  const char* value;
};
struct CodePair {
  char32_t key;
  const char* value;
};
#include "text/clean_tables.inc"

template <size_t N>
const char* Find(const TextPair (&table)[N], std::string_view key) {
  auto it = std::lower_bound(std::begin(table), std::end(table), key,
                             [](const TextPair& p, std::string_view k) { return p.key < k; });
  return it != std::end(table) && it->key == key ? it->value : nullptr;
}
template <size_t N>
const char* Find(const CodePair (&table)[N], char32_t key) {
  auto it = std::lower_bound(std::begin(table), std::end(table), key,
                             [](const CodePair& p, char32_t k) { return p.key < k; });
  return it != std::end(table) && it->key == key ? it->value : nullptr;
}
template <size_t N>
bool Contains(const char32_t (&table)[N], char32_t c) {
  return std::binary_search(std::begin(table), std::end(table), c);
}

void Append(std::u32string* out, const char* utf8) { *out += DecodeUtf8(utf8); }

bool IsAsciiDigit(char32_t c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char32_t c) {
  return IsAsciiDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsAsciiAlnum(char32_t c) {
  return IsAsciiDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// ASCII text of code points known to be ASCII.
std::string Ascii(std::u32string_view s) { return std::string(s.begin(), s.end()); }

// html._replace_charref of a numeric reference: digits in `base`, saturating above U+10FFFF.
void AppendNumericReference(std::u32string_view digits, int base, std::u32string* out) {
  uint64_t num = 0;
  for (char32_t d : digits) {
    const uint64_t v = IsAsciiDigit(d) ? d - '0' : (d | 0x20) - 'a' + 10;
    num = std::min<uint64_t>(num * base + v, 0x7FFFFFFF);
  }
  if (const char* v = Find(kInvalidCharrefs, static_cast<char32_t>(num))) return Append(out, v);
  if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return out->push_back(0xFFFD);
  if (Contains(kInvalidCodepoints, static_cast<char32_t>(num))) return;
  out->push_back(static_cast<char32_t>(num));
}

// ftfy's HTML_ENTITY_RE (&#?[0-9A-Za-z]{1,24};) at text[i] == '&': the match's length or 0.
size_t FtfyEntityLength(std::u32string_view text, size_t i) {
  size_t j = i + 1;
  if (j < text.size() && text[j] == '#') ++j;
  size_t k = j;
  while (k < text.size() && IsAsciiAlnum(text[k]) && k - j < 25) ++k;
  if (k == j || k - j > 24 || k >= text.size() || text[k] != ';') return 0;
  return k + 1 - i;
}

// ftfy.fixes.unescape_html.
std::u32string FtfyUnescapeHtml(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = text[i] == '&' ? FtfyEntityLength(text, i) : 0;
    if (n == 0) {
      out.push_back(text[i++]);
      continue;
    }
    const std::u32string_view entity = text.substr(i, n);
    i += n;
    if (const char* v = Find(kFtfyEntities, Ascii(entity))) {
      Append(&out, v);
    } else if (entity[1] == '#') {
      const std::u32string unescaped = HtmlUnescape(entity);
      out += unescaped.find(';') != std::u32string::npos ? std::u32string(entity) : unescaped;
    } else {
      out += entity;
    }
  }
  return out;
}

// ftfy.fixes: fix_c1_controls, fix_latin_ligatures, fix_character_width, uncurl_quotes,
// fix_line_breaks, in that order, each a pass of its own.
std::u32string MapCharacters(std::u32string_view text) {
  std::u32string a;
  a.reserve(text.size());
  for (char32_t c : text) {
    if (c >= 0x80 && c <= 0x9F) {
      Append(&a, Find(kC1Controls, c));
    } else {
      a.push_back(c);
    }
  }
  std::u32string b;
  b.reserve(a.size());
  for (char32_t c : a) {
    if (const char* v = Find(kLigatures, c)) {
      Append(&b, v);
    } else {
      b.push_back(c);
    }
  }
  a.clear();
  for (char32_t c : b) {
    if (const char* v = Find(kWidthMap, c)) {
      Append(&a, v);
    } else if (c == 0x2BC || (c >= 0x2018 && c <= 0x201B)) {
      a.push_back('\'');
    } else if (c >= 0x201C && c <= 0x201F) {
      a.push_back('"');
    } else {
      a.push_back(c);
    }
  }
  b.clear();
  for (size_t i = 0; i < a.size(); ++i) {
    const char32_t c = a[i];
    if (c == '\r' && i + 1 < a.size() && a[i + 1] == '\n') continue;  // "\r\n" -> "\n"
    b.push_back(c == '\r' || c == 0x2028 || c == 0x2029 || c == 0x85 ? U'\n' : c);
  }
  return b;
}

// ftfy.fixes.remove_terminal_escapes (ANSI_RE "\033\[((?:\d|;)*)([a-zA-Z])", \d being any
// Unicode decimal digit), then remove_control_chars.
std::u32string RemoveEscapesAndControls(std::u32string_view text) {
  std::u32string a;
  a.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] == 0x1B && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && (text[j] == ';' || u_charType(static_cast<UChar32>(text[j])) ==
                                                       U_DECIMAL_DIGIT_NUMBER)) {
        ++j;
      }
      const char32_t end = j < text.size() ? text[j] : 0;
      if ((end >= 'a' && end <= 'z') || (end >= 'A' && end <= 'Z')) {
        i = j + 1;
        continue;
      }
    }
    a.push_back(text[i++]);
  }
  std::u32string b;
  b.reserve(a.size());
  for (char32_t c : a) {
    if (!Contains(kControlChars, c)) b.push_back(c);
  }
  return b;
}

// ftfy.fix_and_explain of one segment.
Result<std::u32string> FixSegment(std::u32string text, bool unescape_html) {
  while (true) {
    const std::u32string before = text;
    if (unescape_html) text = FtfyUnescapeHtml(text);
    MM_ASSIGN_OR_RETURN(text, FixEncoding(std::move(text)));
    text = RemoveEscapesAndControls(MapCharacters(text));
    MM_ASSIGN_OR_RETURN(text, Normalize(text, NormalForm::kNfc));
    if (text == before) return text;
  }
}

std::u32string_view StripPythonSpace(std::u32string_view s) {
  while (!s.empty() && IsPythonSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsPythonSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::u32string HtmlUnescape(std::u32string_view text) {
  if (text.find('&') == std::u32string_view::npos) return std::u32string(text);
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '&') {
      out.push_back(text[i++]);
      continue;
    }
    // _charref: &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)
    size_t j = i + 1;
    if (j < text.size() && text[j] == '#') {
      size_t k = j + 1;
      int base = 10;
      if (k < text.size() && (text[k] == 'x' || text[k] == 'X')) {
        base = 16;
        ++k;
      }
      size_t e = k;
      while (e < text.size() && (base == 10 ? IsAsciiDigit(text[e]) : IsHexDigit(text[e]))) ++e;
      if (e == k && base == 16) {  // "&#x" without digits: not a reference
        out.push_back(text[i++]);
        continue;
      }
      if (e == k) {
        out.push_back(text[i++]);
        continue;
      }
      AppendNumericReference(text.substr(k, e - k), base, &out);
      i = e < text.size() && text[e] == ';' ? e + 1 : e;
      continue;
    }
    size_t e = j;
    auto name_char = [](char32_t c) {
      return c != '\t' && c != '\n' && c != '\f' && c != ' ' && c != '<' && c != '&' && c != '#' &&
             c != ';';
    };
    while (e < text.size() && e - j < 32 && name_char(text[e])) ++e;
    if (e == j) {
      out.push_back(text[i++]);
      continue;
    }
    if (e < text.size() && text[e] == ';') ++e;
    const std::u32string_view name = text.substr(j, e - j);
    i = e;
    bool ascii = true;
    for (char32_t c : name) ascii = ascii && c < 0x80;
    const char* whole = ascii ? Find(kHtml5Entities, Ascii(name)) : nullptr;
    if (whole != nullptr) {
      Append(&out, whole);
      continue;
    }
    // The longest prefix that is an entity (the standard's rule for names without ';').
    bool found = false;
    for (size_t x = name.size() - 1; x > 1 && !found; --x) {
      bool prefix_ascii = true;
      for (size_t k = 0; k < x; ++k) prefix_ascii = prefix_ascii && name[k] < 0x80;
      const char* v = prefix_ascii ? Find(kHtml5Entities, Ascii(name.substr(0, x))) : nullptr;
      if (v != nullptr) {
        Append(&out, v);
        out += name.substr(x);
        found = true;
      }
    }
    if (!found) {
      out.push_back('&');
      out += name;
    }
  }
  return out;
}

Result<std::u32string> FtfyFixText(std::u32string_view text) {
  constexpr size_t kMaxDecodeLength = 1000000;  // ftfy's max_decode_length
  std::u32string out;
  bool unescape_html = true;  // "auto": off from the first segment that holds '<'
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    end = end == std::u32string_view::npos ? text.size() : end + 1;
    end = std::min(end, pos + kMaxDecodeLength);
    const std::u32string_view segment = text.substr(pos, end - pos);
    if (segment.find('<') != std::u32string_view::npos) unescape_html = false;
    MM_ASSIGN_OR_RETURN(std::u32string fixed, FixSegment(std::u32string(segment), unescape_html));
    out += fixed;
    pos = end;
  }
  return out;
}

// Printable ASCII, tab and newline without '&': what every step of ftfy.fix_text and
// html.unescape leaves as it is (no entity, no mojibake, no control or terminal escape, no
// carriage return, already NFC), so only white space and case remain to do.
bool IsPlainAscii(std::string_view text) {
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '&' || c >= 0x7F || (c < 0x20 && c != '\t' && c != '\n')) return false;
  }
  return true;
}

std::u32string CleanPlainAscii(std::string_view text) {
  size_t b = 0, e = text.size();
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n'; };
  while (b < e && space(text[b])) ++b;
  while (e > b && space(text[e - 1])) --e;
  std::u32string out;
  out.reserve(e - b);
  for (size_t i = b; i < e;) {
    if (space(text[i])) {
      while (i < e && space(text[i])) ++i;
      out.push_back(' ');
    } else {
      const char c = text[i++];
      out.push_back(static_cast<char32_t>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
    }
  }
  return out;
}

Result<std::u32string> ClipCleanText(std::string_view caption) {
  if (IsPlainAscii(caption)) return CleanPlainAscii(caption);
  MM_ASSIGN_OR_RETURN(std::u32string text, FtfyFixText(DecodeUtf8(caption)));
  text = HtmlUnescape(HtmlUnescape(text));
  const std::u32string_view basic = StripPythonSpace(text);
  std::u32string spaced;
  spaced.reserve(basic.size());
  for (size_t i = 0; i < basic.size();) {
    if (IsWhiteSpace(basic[i])) {
      while (i < basic.size() && IsWhiteSpace(basic[i])) ++i;
      spaced.push_back(' ');
    } else {
      spaced.push_back(basic[i++]);
    }
  }
  return Lowercase(StripPythonSpace(spaced));
}

}  // namespace mm::pack
