// unicode_text.cc: see unicode_text.h.
#include "text/unicode_text.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace mm::pack {
namespace {

Status FromIcu(UErrorCode code, const char* what) {
  if (U_SUCCESS(code)) return Status::OK();
  return Status::Internal(std::string(what) + ": ICU " + u_errorName(code));
}

icu::UnicodeString ToIcu(std::u32string_view text) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(text.data()),
                                       static_cast<int32_t>(text.size()));
}

std::u32string FromIcuString(const icu::UnicodeString& s) {
  std::u32string out;
  out.reserve(s.length());
  for (int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    out.push_back(static_cast<char32_t>(c));
    i += U16_LENGTH(c);
  }
  return out;
}

}  // namespace

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += len;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c >= 0xD800 && (c <= 0xDFFF || c > 0x10FFFF)) c = 0xFFFD;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(c, &out);
  return out;
}

Result<std::u32string> Normalize(std::u32string_view text, NormalForm form) {
  UErrorCode code = U_ZERO_ERROR;
  // Owned by ICU, immutable, thread-safe.
  const icu::Normalizer2* n = form == NormalForm::kNfc    ? icu::Normalizer2::getNFCInstance(code)
                              : form == NormalForm::kNfd  ? icu::Normalizer2::getNFDInstance(code)
                              : form == NormalForm::kNfkc ? icu::Normalizer2::getNFKCInstance(code)
                                                          : icu::Normalizer2::getNFKDInstance(code);
  MM_RETURN_NOT_OK(FromIcu(code, "loading a Unicode normalizer"));
  const icu::UnicodeString in = ToIcu(text);
  if (n->isNormalized(in, code) && U_SUCCESS(code)) return std::u32string(text);
  code = U_ZERO_ERROR;
  icu::UnicodeString out = n->normalize(in, code);
  MM_RETURN_NOT_OK(FromIcu(code, "Unicode normalisation"));
  return FromIcuString(out);
}

Result<std::u32string> Lowercase(std::u32string_view text) {
  bool ascii = true;
  for (char32_t c : text) ascii = ascii && c < 0x80;
  if (ascii) {
    std::u32string out(text);
    for (char32_t& c : out) {
      if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    }
    return out;
  }
  icu::UnicodeString s = ToIcu(text);
  s.toLower(icu::Locale::getRoot());
  return FromIcuString(s);
}

bool IsWhiteSpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPythonSpace(char32_t c) { return IsWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

}  // namespace mm::pack
