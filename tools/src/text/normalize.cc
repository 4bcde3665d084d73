// normalize.cc: see normalize.h. ICU's UErrorCode is translated here only.
#include "text/normalize.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include <string>

namespace mm::pack {
namespace {

Status FromIcu(UErrorCode code, const char* what) {
  if (U_SUCCESS(code)) return Status::OK();
  return Status::Internal(std::string(what) + ": ICU " + u_errorName(code));
}

}  // namespace

Result<std::string> NormalizeForTokenizer(std::string_view caption, const TextOptions& options) {
  if (options.identity()) return std::string(caption);
  icu::UnicodeString text = icu::UnicodeString::fromUTF8(
      icu::StringPiece(caption.data(), static_cast<int32_t>(caption.size())));
  if (options.normalize == TextNormalization::kNfkc) {
    UErrorCode code = U_ZERO_ERROR;
    // Owned by ICU, immutable, thread-safe.
    const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(code);
    MM_RETURN_NOT_OK(FromIcu(code, "loading the NFKC normalizer"));
    icu::UnicodeString normal = nfkc->normalize(text, code);
    MM_RETURN_NOT_OK(FromIcu(code, "NFKC normalisation"));
    text = std::move(normal);
  }
  if (options.lowercase) text.toLower(icu::Locale::getRoot());
  std::string out;
  text.toUTF8String(out);
  return out;
}

}  // namespace mm::pack
