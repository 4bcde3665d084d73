// brace.cc: see brace.h.
#include "ingest/brace.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace mm::pack {
namespace {

// The position of the '}' closing the '{' at `open`, or npos.
size_t Closing(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// The top-level comma-separated parts of a group's inside.
std::vector<std::string_view> Alternatives(std::string_view inside) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < inside.size(); ++i) {
    if (inside[i] == '{') ++depth;
    if (inside[i] == '}') --depth;
    if (inside[i] == ',' && depth == 0) {
      out.push_back(inside.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(inside.substr(start));
  return out;
}

bool IsInteger(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i == s.size() || s.size() - i > 18) return false;
  for (; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// "{N..M}"'s names, or InvalidArgument.
Result<std::vector<std::string>> Range(std::string_view from_text, std::string_view to_text,
                                       size_t max_count) {
  if (!IsInteger(from_text) || !IsInteger(to_text)) {
    return Status::InvalidArgument("brace range {" + std::string(from_text) + ".." +
                                   std::string(to_text) + "} needs two integers");
  }
  const int64_t from = std::strtoll(std::string(from_text).c_str(), nullptr, 10);
  const int64_t to = std::strtoll(std::string(to_text).c_str(), nullptr, 10);
  const uint64_t count = (from <= to ? to - from : from - to) + uint64_t{1};
  if (count > max_count) {
    return Status::InvalidArgument("brace range {" + std::string(from_text) + ".." +
                                   std::string(to_text) + "} names " + std::to_string(count) +
                                   " items, over " + std::to_string(max_count));
  }
  auto padded = [](std::string_view s) {
    const size_t digits = s[0] == '-' ? 1 : 0;
    return s.size() > digits + 1 && s[digits] == '0';
  };
  const size_t width =
      padded(from_text) || padded(to_text) ? std::max(from_text.size(), to_text.size()) : 0;
  std::vector<std::string> out;
  const int64_t step = from <= to ? 1 : -1;
  for (int64_t v = from;; v += step) {
    std::string digits = std::to_string(v < 0 ? -v : v);
    const size_t sign = v < 0 ? 1 : 0;
    if (digits.size() + sign < width) digits.insert(0, width - digits.size() - sign, '0');
    out.push_back((v < 0 ? "-" : "") + digits);
    if (v == to) break;
  }
  return out;
}

}  // namespace

bool HasBraceGroup(const std::string& text) {
  const size_t open = text.find('{');
  return open != std::string::npos && text.find('}', open) != std::string::npos;
}

Result<std::vector<std::string>> ExpandBraces(const std::string& text, size_t max_count) {
  // Each group is a level of recursion: bounded, so no argument can exhaust the stack.
  if (std::count(text.begin(), text.end(), '{') > kMaxBraceGroups) {
    return Status::InvalidArgument("'" + text.substr(0, 80) + "...': more than " +
                                   std::to_string(kMaxBraceGroups) + " brace groups");
  }
  const size_t open = text.find('{');
  if (open == std::string::npos) {
    if (text.find('}') != std::string::npos) {
      return Status::InvalidArgument("'" + text + "': '}' without '{'");
    }
    return std::vector<std::string>{text};
  }
  const size_t close = Closing(text, open);
  if (close == std::string::npos) {
    return Status::InvalidArgument("'" + text + "': '{' without '}'");
  }
  const std::string_view inside = std::string_view(text).substr(open + 1, close - open - 1);
  if (inside.empty()) return Status::InvalidArgument("'" + text + "': an empty brace group {}");
  std::vector<std::string> choices;
  const size_t dots = inside.find("..");
  if (inside.find_first_of("{},") == std::string_view::npos && dots != std::string_view::npos) {
    MM_ASSIGN_OR_RETURN(choices, Range(inside.substr(0, dots), inside.substr(dots + 2), max_count));
  } else if (const std::vector<std::string_view> alternatives = Alternatives(inside);
             alternatives.size() == 1) {  // "{abc}" is text, as in bash
    MM_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        ExpandBraces(std::string(alternatives[0]), max_count));
    for (std::string& n : names) choices.push_back("{" + n + "}");
  } else {
    for (std::string_view alternative : alternatives) {
      MM_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          ExpandBraces(std::string(alternative), max_count));
      for (std::string& n : names) choices.push_back(std::move(n));
    }
  }
  MM_ASSIGN_OR_RETURN(std::vector<std::string> tails,
                      ExpandBraces(text.substr(close + 1), max_count));
  if (choices.size() * tails.size() > max_count) {
    return Status::InvalidArgument("'" + text + "' names " +
                                   std::to_string(choices.size() * tails.size()) + " items, over " +
                                   std::to_string(max_count));
  }
  const std::string head = text.substr(0, open);
  std::vector<std::string> out;
  out.reserve(choices.size() * tails.size());
  for (const std::string& c : choices) {
    for (const std::string& t : tails) out.push_back(head + c + t);
  }
  return out;
}

}  // namespace mm::pack
