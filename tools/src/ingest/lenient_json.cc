// lenient_json.cc: see lenient_json.h.
#include "ingest/lenient_json.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "mm/internal/utf8.h"

namespace mm::pack {
namespace {

bool IsHex4(std::string_view s, size_t at, uint32_t* cp) {
  if (at + 4 > s.size()) return false;
  uint32_t v = 0;
  for (size_t k = at; k < at + 4; ++k) {
    const char c = s[k];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  *cp = v;
  return true;
}

// The offsets of the backslash of every \u escape of a lone surrogate (a high half without a
// low half after it, or a low half alone).
std::vector<size_t> LoneSurrogateEscapes(std::string_view text) {
  std::vector<size_t> lone;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    uint32_t cp, low;
    if (text[i + 1] == 'u' && IsHex4(text, i + 2, &cp)) {
      if (cp >= 0xD800 && cp <= 0xDBFF && i + 7 < text.size() && text[i + 6] == '\\' &&
          text[i + 7] == 'u' && IsHex4(text, i + 8, &low) && low >= 0xDC00 && low <= 0xDFFF) {
        i += 11;  // a proper pair
        continue;
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) lone.push_back(i);
      i += 5;
      continue;
    }
    ++i;  // any other escape, \\ included
  }
  return lone;
}

// UTF-8 of a BMP code point at or above U+0800 (three bytes).
std::string Utf8Of3(uint32_t c) {
  return {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
          static_cast<char>(0x80 | (c & 0x3F))};
}

// The first noncharacter (U+FFFF, U+FFFE, U+FDD0..U+FDEF) that `text` holds neither raw nor
// escaped (in either case); U+FFFF if it holds them all.
// Whether `text` holds the escape "\\u" + `hex4` (4 hex digits, any case) for `c`.
bool HasEscapeOf(std::string_view text, uint32_t c) {
  char want[5];
  std::snprintf(want, sizeof want, "%04x", static_cast<unsigned>(c));
  for (size_t at = text.find("\\u"); at != std::string_view::npos; at = text.find("\\u", at + 1)) {
    if (at + 6 > text.size()) break;
    bool same = true;
    for (int k = 0; k < 4 && same; ++k) {
      const char h = text[at + 2 + k];
      same = (h >= 'A' && h <= 'F' ? static_cast<char>(h - 'A' + 'a') : h) == want[k];
    }
    if (same) return true;
  }
  return false;
}

uint32_t ChooseMark(std::string_view text) {
  std::vector<uint32_t> candidates = {0xFFFF, 0xFFFE};
  for (uint32_t c = 0xFDD0; c <= 0xFDEF; ++c) candidates.push_back(c);
  for (uint32_t c : candidates) {
    if (text.find(Utf8Of3(c)) == std::string_view::npos && !HasEscapeOf(text, c)) return c;
  }
  return 0xFFFF;
}

// NeutralizeJson's text, handed to `sink` piece by piece.
void Rewrite(std::string_view text, const std::vector<size_t>& lone, uint32_t mark,
             const std::function<void(std::string_view)>& sink) {
  const std::string mark_utf8 = Utf8Of3(mark);
  char mark_escape[8];
  std::snprintf(mark_escape, sizeof mark_escape, "\\u%04X", static_cast<unsigned>(mark));
  size_t next_lone = 0;
  for (size_t i = 0; i < text.size();) {
    if (next_lone < lone.size() && lone[next_lone] == i) {
      sink(mark_escape);
      i += 6;
      ++next_lone;
      continue;
    }
    // Copy up to the next lone escape, marking invalid bytes on the way.
    const size_t end = next_lone < lone.size() ? lone[next_lone] : text.size();
    std::string_view part = text.substr(i, end - i);
    while (!part.empty()) {
      const size_t bad = FirstInvalidUtf8(part);
      if (bad == std::string_view::npos) {
        sink(part);
        break;
      }
      sink(part.substr(0, bad));
      sink(mark_utf8);
      part.remove_prefix(bad + 1);
    }
    i = end;
  }
}

}  // namespace

NeutralJson NeutralizeJsonTo(std::string_view text,
                             const std::function<void(std::string_view)>& sink) {
  NeutralJson out;
  const std::vector<size_t> lone = LoneSurrogateEscapes(text);
  if (lone.empty() && IsValidUtf8(text)) return out;
  out.changed = true;
  const uint32_t mark = ChooseMark(text);
  out.mark = Utf8Of3(mark);
  Rewrite(text, lone, mark, sink);
  return out;
}

NeutralJson NeutralizeJson(std::string_view text) {
  std::string rewritten;
  NeutralJson out =
      NeutralizeJsonTo(text, [&rewritten](std::string_view piece) { rewritten.append(piece); });
  out.text = out.changed ? std::move(rewritten) : std::string(text);
  return out;
}

void RestoreInvalid(std::string* s, const std::string& mark) {
  if (mark.empty()) return;
  for (size_t at = s->find(mark); at != std::string::npos; at = s->find(mark, at + 1)) {
    s->replace(at, mark.size(), "\xFF");
  }
}

}  // namespace mm::pack
