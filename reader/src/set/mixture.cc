// mixture.cc: see mm/internal/mixture.h.
#include "mm/internal/mixture.h"

#include <sys/stat.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "mm/internal/file.h"
#include "remote/location.h"

namespace mm::reader::internal {
namespace {

constexpr int64_t kMaxSpecBytes = 1 << 20;

Result<double> ParseWeight(const std::string& text, const std::string& where) {
  size_t used = 0;
  double w = 0;
  try {
    w = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(w) || w <= 0) {
    return Status::InvalidArgument(where + ": weight '" + text + "' is not a positive number");
  }
  return w;
}

// "LOC:W" -> (LOC, W), or (LOC, 0) when no weight follows the last colon. A colon right after
// an http(s) host is a port, not a weight.
Result<MixtureSpec::Set> ParseItem(const std::string& item) {
  MixtureSpec::Set set{item, 0};
  const size_t colon = item.rfind(':');
  if (colon == std::string::npos || colon + 1 == item.size()) return set;
  const std::string head = item.substr(0, colon), tail = item.substr(colon + 1);
  if (tail.find('/') != std::string::npos || head.empty()) return set;  // "s3://..." itself
  const size_t scheme = head.find("://");
  if (scheme != std::string::npos && head.compare(0, 2, "s3") != 0 &&
      head.find('/', scheme + 3) == std::string::npos) {
    return set;  // http://host:8080
  }
  MM_ASSIGN_OR_RETURN(set.weight, ParseWeight(tail, item));
  set.location = head;
  return set;
}

Result<MixtureSpec> ParseList(const std::string& text) {
  MixtureSpec spec;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    const std::string item = text.substr(begin, comma == std::string::npos ? comma : comma - begin);
    if (item.empty()) return Status::InvalidArgument("mixture '" + text + "': an empty set");
    MM_ASSIGN_OR_RETURN(MixtureSpec::Set set, ParseItem(item));
    spec.sets.push_back(std::move(set));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return spec;
}

Result<MixtureSpec> ParseFile(const std::string& path) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(path, &text, kMaxSpecBytes));
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(
        path + ": " + why + " (a mixture is {\"sets\": [{\"path\": ..., \"weight\": ...}]})");
  };
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("sets") || !doc["sets"].is_array() || doc["sets"].empty()) {
    return bad("no \"sets\" array");
  }
  const std::string dir =
      path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  MixtureSpec spec;
  for (const auto& s : doc["sets"]) {
    if (!s.is_object() || !s.contains("path") || !s["path"].is_string()) {
      return bad("a set without a \"path\" string");
    }
    MixtureSpec::Set set{s["path"].get<std::string>(), 0};
    if (set.location.empty()) return bad("an empty \"path\"");
    if (!IsRemoteLocation(set.location) && set.location[0] != '/') {
      set.location = dir + "/" + set.location;
    }
    if (s.contains("weight")) {
      if (!s["weight"].is_number()) return bad("\"weight\" is not a number");
      MM_ASSIGN_OR_RETURN(set.weight, ParseWeight(s["weight"].dump(), path));
    }
    spec.sets.push_back(std::move(set));
  }
  if (doc.contains("epoch_size")) {
    const auto& size = doc["epoch_size"];
    // nlohmann keeps a positive integer unsigned (up to 2^64 - 1): compare before narrowing.
    const bool in_range = size.is_number_unsigned()
                              ? size.get<uint64_t>() >= 1 &&
                                    size.get<uint64_t>() <= static_cast<uint64_t>(kMaxEpochSize)
                          : size.is_number_integer()
                              ? size.get<int64_t>() >= 1 && size.get<int64_t>() <= kMaxEpochSize
                              : false;
    if (!in_range) return bad("\"epoch_size\" is not an integer in [1, 2^53]");
    spec.epoch_size = size.get<int64_t>();
  }
  return spec;
}

}  // namespace

Result<std::optional<MixtureSpec>> ParseMixture(const std::string& location) {
  MixtureSpec spec;
  struct stat st;
  const bool local = !IsRemoteLocation(location);
  if (local && ::stat(location.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::optional<MixtureSpec>();
    MM_ASSIGN_OR_RETURN(spec, ParseFile(location));
  } else {
    MM_ASSIGN_OR_RETURN(spec, ParseList(location));
    if (spec.sets.size() == 1 && spec.sets[0].weight == 0) return std::optional<MixtureSpec>();
  }
  size_t weighted = 0;
  for (const auto& s : spec.sets) weighted += s.weight > 0 ? 1 : 0;
  if (weighted != 0 && weighted != spec.sets.size()) {
    return Status::InvalidArgument("mixture '" + location +
                                   "': give every set a weight, or none (natural sizes)");
  }
  spec.weighted = weighted > 0;
  return std::optional<MixtureSpec>(std::move(spec));
}

}  // namespace mm::reader::internal
