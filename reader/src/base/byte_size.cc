// byte_size.cc: see mm/internal/byte_size.h.
#include "mm/internal/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace mm {
namespace {

// Bytes per unit, lower-cased; 0 for an unknown unit.
double UnitScale(const std::string& unit) {
  constexpr double kKi = 1024.0;
  if (unit.empty() || unit == "b") return 1;
  if (unit == "k" || unit == "kib") return kKi;
  if (unit == "m" || unit == "mib") return kKi * kKi;
  if (unit == "g" || unit == "gib") return kKi * kKi * kKi;
  if (unit == "t" || unit == "tib") return kKi * kKi * kKi * kKi;
  if (unit == "kb") return 1e3;
  if (unit == "mb") return 1e6;
  if (unit == "gb") return 1e9;
  if (unit == "tb") return 1e12;
  return 0;
}

}  // namespace

Result<int64_t> ParseByteSize(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a byte size (" + why +
                                   "; e.g. 4096, 256MB, 1.5GiB)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return bad("no number");
  const std::string number_text(text.substr(0, i));
  char* end = nullptr;
  const double number = std::strtod(number_text.c_str(), &end);
  if (end != number_text.c_str() + number_text.size()) return bad("not a number");
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const double scale = UnitScale(unit);
  if (scale == 0) return bad("unknown unit");
  const double bytes = std::floor(number * scale);
  if (!(bytes >= 1)) return bad("not positive");
  if (bytes >= 9.2e18) return bad("too large");
  return static_cast<int64_t>(bytes);
}

}  // namespace mm
