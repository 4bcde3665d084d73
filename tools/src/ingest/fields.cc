// fields.cc: see fields.h.
#include "ingest/fields.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "text/ascii.h"

namespace mm::pack {

std::optional<double> FieldValue::AsNumber() const {
  if (type == Type::kInt) return static_cast<double>(i);
  if (type == Type::kUint) return static_cast<double>(u());
  if (type == Type::kFloat) return f;
  return std::nullopt;
}

FieldValue FieldValue::FromText(const std::string& text) {
  FieldValue v;
  const size_t from = text.find_first_not_of(" \t");
  if (from == std::string::npos) return v;  // empty: missing
  const size_t to = text.find_last_not_of(" \t");
  const std::string t = text.substr(from, to - from + 1);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(t.c_str(), &end, 10);
  if (errno == 0 && end == t.c_str() + t.size()) {
    v.type = Type::kInt;
    v.i = i;
    return v;
  }
  if (errno == ERANGE && t[0] != '-') {  // above int64: a uint64 (a 64-bit hash) still fits
    errno = 0;
    const unsigned long long u = std::strtoull(t.c_str(), &end, 10);
    if (errno == 0 && end == t.c_str() + t.size()) {
      v.type = Type::kUint;
      v.i = static_cast<int64_t>(u);
      return v;
    }
  }
  errno = 0;
  const double f = std::strtod(t.c_str(), &end);
  const bool word = std::isalpha(static_cast<unsigned char>(t.back())) &&
                    t.find_first_of("0123456789") == std::string::npos;  // "nan", "inf"
  if (errno == 0 && end == t.c_str() + t.size() && !word) {
    v.type = Type::kFloat;
    v.f = f;
    return v;
  }
  v.type = Type::kString;
  v.s = text;
  return v;
}

FieldPlan::FieldPlan(const FieldNames& names)
    : image(names.image), caption(names.caption), extra(names.extra) {
  if (image.empty()) image = {"image", "image_path", "file_name", "filepath", "url"};
  every_caption_field = !caption.empty();
  if (caption.empty()) caption = {"text", "caption", "title"};
}

std::string FieldPlan::List(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

FieldValue JsonField(const nlohmann::json& v) {
  FieldValue out;
  if (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) {  // a 64-bit hash or id
    out.type = FieldValue::Type::kUint;
    out.i = static_cast<int64_t>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    out.type = FieldValue::Type::kInt;
    out.i = v.get<int64_t>();
  } else if (v.is_number()) {
    out.type = FieldValue::Type::kFloat;
    out.f = v.get<double>();
  } else if (v.is_string()) {
    out.type = FieldValue::Type::kString;
    out.s = v.get<std::string>();
  } else if (v.is_boolean()) {
    out.type = FieldValue::Type::kInt;
    out.i = v.get<bool>() ? 1 : 0;
  }
  return out;
}

std::vector<std::string> JsonCaptions(const nlohmann::json& obj, const FieldPlan& plan) {
  std::vector<std::string> out;
  for (const std::string& name : plan.caption) {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) continue;
    if (it->is_string()) out.push_back(it->get<std::string>());
    if (it->is_array()) {
      for (const nlohmann::json& c : *it) {
        if (c.is_string()) out.push_back(c.get<std::string>());
      }
    }
    if (!plan.every_caption_field) break;
  }
  return out;
}

bool IsRemoteUrl(const std::string& path) {
  const size_t colon = path.find("://");
  if (colon == std::string::npos || colon < 2) return false;
  if (!std::isalpha(static_cast<unsigned char>(path[0]))) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = path[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

namespace {

int FindColumn(const std::vector<std::string>& header, const std::string& name) {
  const std::string want = AsciiLower(name);
  for (size_t c = 0; c < header.size(); ++c) {
    std::string h = AsciiLower(header[c]);
    const size_t from = h.find_first_not_of(" \t\r");
    const size_t to = h.find_last_not_of(" \t\r");
    h = from == std::string::npos ? std::string() : h.substr(from, to - from + 1);
    if (h == want) return static_cast<int>(c);
  }
  return -1;
}

}  // namespace

ColumnPlan PlanColumns(const std::vector<std::string>& header, const FieldPlan& plan) {
  ColumnPlan out;
  for (const std::string& name : plan.image) {
    out.image = FindColumn(header, name);
    if (out.image >= 0) break;
  }
  for (const std::string& name : plan.caption) {
    const int c = FindColumn(header, name);
    if (c < 0) continue;
    out.captions.push_back(c);
    if (!plan.every_caption_field) break;
  }
  for (const std::string& name : plan.extra) out.extra.push_back(FindColumn(header, name));
  return out;
}

}  // namespace mm::pack
