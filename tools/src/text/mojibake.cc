// mojibake.cc: see mojibake.h. Each function names the ftfy function it reproduces.
#include "text/mojibake.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/regex.h"
#include "text/unicode_text.h"

namespace mm::pack {
namespace {

#include "text/mojibake_tables.inc"

constexpr int kEncodings = sizeof(kCharmapNames) / sizeof(kCharmapNames[0]);
constexpr int kLatin1 = 0;  // CHARMAP_ENCODINGS[0]

struct Charmap {
  std::unordered_set<char32_t> allowed;          // chardata.possible_encoding's characters
  std::unordered_map<char32_t, uint8_t> encode;  // text.encode(encoding)
  bool sloppy = false;
  bool macroman = false;
};

struct Ftfy {
  std::array<Charmap, kEncodings> maps;
  Regex badness, detector, altered, lossy, a_grave;
  Status status;
};

Result<const Ftfy*> GetFtfy() {
  static const Ftfy* ftfy = [] {
    auto* f = new Ftfy();  // lives as long as the process (tables shared by every thread)
    for (int e = 0; e < kEncodings; ++e) {
      Charmap& m = f->maps[e];
      const std::string name = kCharmapNames[e];
      m.sloppy = name.rfind("sloppy", 0) == 0;
      m.macroman = name == "macroman";
      // possible_encoding: ^[\x00-\x19\x1b-\x7f{decoded 0x80..0xff and 0x1a}]*$
      for (char32_t c = 0; c < 0x80; ++c) {
        if (c != 0x1A) m.allowed.insert(c);
      }
      for (int b = 0x80; b < 0x100; ++b) m.allowed.insert(kCharmaps[e][b]);
      m.allowed.insert(kCharmaps[e][0x1A]);
      for (int b = 255; b >= 0; --b) m.encode[kCharmaps[e][b]] = static_cast<uint8_t>(b);
    }
    auto compile = [&](Regex* r, const char* pattern, uint32_t flags) {
      if (!f->status.ok()) return;
      auto c = Regex::Compile(pattern, flags);
      if (c.ok()) {
        *r = *c;
      } else {
        f->status = c.status();
      }
    };
    compile(&f->badness, kBadnessPattern, Regex::kExtended);
    compile(&f->detector, kUtf8DetectorPattern, Regex::kExtended);
    compile(&f->altered, kAlteredUtf8Pattern, Regex::kBytes);
    compile(&f->lossy, kLossyUtf8Pattern, Regex::kBytes);
    compile(&f->a_grave, kAGraveWordPattern, Regex::kBytes);
    return f;
  }();
  if (!ftfy->status.ok()) return ftfy->status;
  return ftfy;
}

bool IsAscii(std::u32string_view text) {
  return std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; });
}

// badness.is_bad.
bool IsBad(const Ftfy& f, std::u32string_view text) { return f.badness.Search(EncodeUtf8(text)); }

// Python's bytes.decode("utf-8") (strict), or with `variants` ftfy's "utf-8-variants": also
// C0 80 as U+0000 and CESU-8 surrogate pairs (ED A0-AF xx ED B0-BF xx) as one character.
// False where Python raises UnicodeDecodeError.
bool DecodeStrict(const std::string& bytes, bool variants, std::u32string* out) {
  out->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    if (variants && b == 0xC0 && i + 1 < n && p[i + 1] == 0x80) {
      out->push_back(0);
      i += 2;
      continue;
    }
    if (variants && b == 0xED && i + 5 < n && p[i + 1] >= 0xA0 && p[i + 1] <= 0xAF &&
        (p[i + 2] & 0xC0) == 0x80 && p[i + 3] == 0xED && p[i + 4] >= 0xB0 && p[i + 4] <= 0xBF &&
        (p[i + 5] & 0xC0) == 0x80) {
      out->push_back(static_cast<char32_t>(((p[i + 1] & 0x0F) << 16) + ((p[i + 2] & 0x3F) << 10) +
                                           ((p[i + 4] & 0x0F) << 6) + (p[i + 5] & 0x3F) + 0x10000));
      i += 6;
      continue;
    }
    if (b < 0x80) {
      out->push_back(b);
      ++i;
      continue;
    }
    int len = 0;
    char32_t c = 0, min = 0;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2, c = b & 0x1F, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3, c = b & 0x0F, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4, c = b & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    out->push_back(c);
    i += len;
  }
  return true;
}

// `re`.sub over bytes, each match replaced by `replace(match)`.
template <typename Fn>
Result<std::string> SubBytes(const Regex& re, const std::string& bytes, Fn replace) {
  std::vector<std::pair<size_t, size_t>> m;
  MM_RETURN_NOT_OK(re.FindAll(bytes, &m));
  std::string out;
  size_t at = 0;
  for (const auto& [b, e] : m) {
    out.append(bytes, at, b - at);
    out += replace(bytes.substr(b, e - b));
    at = e;
  }
  out.append(bytes, at, std::string::npos);
  return out;
}

// fixes.restore_byte_a0.
Result<std::string> RestoreByteA0(const Ftfy& f, const std::string& bytes) {
  MM_ASSIGN_OR_RETURN(std::string a, SubBytes(f.a_grave, bytes, [](const std::string&) {
                        return std::string("\xC3\xA0 ");
                      }));
  return SubBytes(f.altered, a, [](std::string s) {
    std::replace(s.begin(), s.end(), ' ', '\xA0');
    return s;
  });
}

Result<std::u32string> FixEncodingImpl(const Ftfy& f, std::u32string text);

// fixes.decode_inconsistent_utf8.
Result<std::u32string> DecodeInconsistentUtf8(const Ftfy& f, const std::u32string& text) {
  const std::string s = EncodeUtf8(text);
  std::vector<std::pair<size_t, size_t>> m;
  MM_RETURN_NOT_OK(f.detector.FindAll(s, &m));
  std::u32string out;
  size_t at = 0;
  for (const auto& [b, e] : m) {
    out += DecodeUtf8(std::string_view(s).substr(at, b - at));
    std::u32string sub = DecodeUtf8(std::string_view(s).substr(b, e - b));
    if (sub.size() < text.size() && IsBad(f, sub)) {
      MM_ASSIGN_OR_RETURN(sub, FixEncodingImpl(f, std::move(sub)));
    }
    out += sub;
    at = e;
  }
  out += DecodeUtf8(std::string_view(s).substr(at));
  return out;
}

// ftfy._fix_encoding_one_step_and_explain.
Result<std::u32string> OneStep(const Ftfy& f, const std::u32string& text) {
  if (text.empty() || IsAscii(text) || !IsBad(f, text)) return text;
  std::vector<int> possible;
  std::u32string fixed;
  for (int e = 0; e < kEncodings; ++e) {
    const Charmap& m = f.maps[e];
    bool can = true;
    for (char32_t c : text) can = can && m.allowed.count(c) > 0;
    if (!can) continue;
    possible.push_back(e);
    std::string bytes;
    bytes.reserve(text.size());
    for (char32_t c : text) {
      auto b = m.encode.find(c);
      if (b == m.encode.end()) break;  // (never: every allowed character has a byte)
      bytes.push_back(static_cast<char>(b->second));
    }
    if (bytes.size() != text.size()) continue;
    if (!m.macroman && f.altered.Search(bytes)) {
      MM_ASSIGN_OR_RETURN(bytes, RestoreByteA0(f, bytes));
    }
    if (m.sloppy) {
      MM_ASSIGN_OR_RETURN(bytes, SubBytes(f.lossy, bytes, [](const std::string&) {
                            return std::string("\xEF\xBF\xBD");
                          }));
    }
    const bool variants =
        bytes.find('\xED') != std::string::npos || bytes.find('\xC0') != std::string::npos;
    if (DecodeStrict(bytes, variants, &fixed)) return fixed;
  }
  if (f.detector.Search(EncodeUtf8(text))) {
    MM_ASSIGN_OR_RETURN(fixed, DecodeInconsistentUtf8(f, text));
    if (fixed != text) return fixed;
  }
  if (std::find(possible.begin(), possible.end(), kLatin1) != possible.end()) {
    // text.encode("latin-1").decode("windows-1252"), strict ("windows-1252" itself is never
    // among the possible encodings: only its sloppy variant is tried).
    fixed.clear();
    bool ok = true;
    for (char32_t c : text) {
      const char32_t d = kWindows1252[c & 0xFF];
      ok = ok && d != 0xFFFFFFFF;
      fixed.push_back(d);
    }
    if (ok && fixed != text) return fixed;
  }
  // fixes.fix_c1_controls: U+0080..U+009F as sloppy-windows-1252 (CHARMAP_ENCODINGS[1]).
  if (std::any_of(text.begin(), text.end(), [](char32_t c) { return c >= 0x80 && c <= 0x9F; })) {
    fixed = text;
    for (char32_t& c : fixed) {
      if (c >= 0x80 && c <= 0x9F) c = kCharmaps[1][c];
    }
    return fixed;
  }
  return text;
}

Result<std::u32string> FixEncodingImpl(const Ftfy& f, std::u32string text) {
  while (true) {
    MM_ASSIGN_OR_RETURN(std::u32string next, OneStep(f, text));
    if (next == text) return text;
    text = std::move(next);
  }
}

}  // namespace

Result<std::u32string> FixEncoding(std::u32string text) {
  MM_ASSIGN_OR_RETURN(const Ftfy* f, GetFtfy());
  return FixEncodingImpl(*f, std::move(text));
}

}  // namespace mm::pack
