// regex.cc: see regex.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>

#include "mm/internal/c_handles.h"

namespace mm::pack {

struct Regex::Code {
  std::unique_ptr<pcre2_code, CDeleter<pcre2_code_free>> code;
};

namespace {

using MatchDataPtr = std::unique_ptr<pcre2_match_data, CDeleter<pcre2_match_data_free>>;

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return "PCRE2 error";
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Result<Regex> Regex::Compile(std::string_view pattern, uint32_t flags) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = ((flags & kBytes) ? 0 : PCRE2_UTF | PCRE2_UCP) |
                           ((flags & kCaseless) ? PCRE2_CASELESS : 0) |
                           ((flags & kExtended) ? PCRE2_EXTENDED : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    return Status::InvalidArgument("regular expression '" + std::string(pattern) + "' at " +
                                   std::to_string(offset) + ": " + Pcre2Message(error));
  }
  auto owned = std::make_shared<Code>();
  owned->code.reset(code);
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // interpreted where JIT is unavailable
  Regex r;
  r.code_ = std::move(owned);
  return r;
}

bool Regex::Search(std::string_view subject) const {
  MatchDataPtr data(pcre2_match_data_create_from_pattern(code_->code.get(), nullptr));
  if (data == nullptr) return false;
  return pcre2_match(code_->code.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                     subject.size(), 0, PCRE2_NO_UTF_CHECK, data.get(), nullptr) >= 0;
}

Status Regex::FindAll(std::string_view subject,
                      std::vector<std::pair<size_t, size_t>>* matches) const {
  matches->clear();
  MatchDataPtr data(pcre2_match_data_create_from_pattern(code_->code.get(), nullptr));
  if (data == nullptr) return Status::Internal("PCRE2: out of memory");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t at = 0;
  while (at <= subject.size()) {
    const int rc = pcre2_match(code_->code.get(), s, subject.size(), at, PCRE2_NO_UTF_CHECK,
                               data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return Status::Internal("PCRE2: " + Pcre2Message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      matches->emplace_back(begin, end);
      at = end;
    } else {  // empty: skip one character
      at = end + 1;
      while (at < subject.size() && (static_cast<unsigned char>(subject[at]) & 0xC0) == 0x80) ++at;
    }
  }
  return Status::OK();
}

}  // namespace mm::pack
