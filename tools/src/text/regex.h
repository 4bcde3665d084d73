// regex.h: the regular expressions of the tokenizers' pre-tokenizers, on PCRE2 (Debian's
// libpcre2-8, https://www.pcre.org) in UTF mode with Unicode properties (PCRE2_UTF |
// PCRE2_UCP) and its JIT where the CPU has one. PCRE2's error codes are translated here only.
//
// PCRE2's \s under PCRE2_UCP also matches U+180E; the tokenizers' references (Python's regex
// module, Oniguruma) match Unicode White_Space, so callers spell white space out
// (kWhiteSpaceClass) instead of writing \s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/status.h"

namespace mm::pack {

/// Unicode White_Space as the body of a character class: [kWhiteSpaceClass] is \s of
/// Python's regex module and of Oniguruma.
inline constexpr std::string_view kWhiteSpaceClass =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

/// A compiled pattern. Immutable after Compile; Find is thread-safe (each call has its own
/// match data).
class Regex {
 public:
  enum Flags : uint32_t {
    kCaseless = 1,  // PCRE2_CASELESS
    kExtended = 2,  // PCRE2_EXTENDED: white space outside classes ignored (Python's VERBOSE)
    kBytes = 4,     // no UTF: the pattern and subjects are bytes (Python's bytes patterns)
  };
  /// Compiles `pattern` (PCRE2 syntax, UTF-8 unless kBytes) with `flags`.
  /// Errors: InvalidArgument (PCRE2's message and the offset in the pattern).
  static Result<Regex> Compile(std::string_view pattern, uint32_t flags = 0);

  /// Whether the pattern matches somewhere in `subject` (Python's search).
  bool Search(std::string_view subject) const;

  /// The non-overlapping matches of the pattern in `subject` (valid UTF-8), left to right,
  /// as [begin, end) byte offsets; an empty match advances by one character, as Python's
  /// re.finditer and Rust's find_iter do. Errors: Internal (a match limit hit).
  [[nodiscard]] Status FindAll(std::string_view subject,
                               std::vector<std::pair<size_t, size_t>>* matches) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

}  // namespace mm::pack
