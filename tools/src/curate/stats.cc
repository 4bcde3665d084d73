// stats.cc: see stats.h.
#include "curate/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

namespace mm::pack {
namespace {

using ojson = nlohmann::ordered_json;

size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// A bin edge: an integer where it is one (token and character counts, pixels).
ojson Edge(double e) { return e == std::floor(e) ? ojson(static_cast<int64_t>(e)) : ojson(e); }

// Summary and histogram of `values` over bins starting at `edges` (the last bin open-ended,
// its "to" null).
template <typename T>
ojson Describe(std::vector<T> values, const std::vector<double>& edges) {
  ojson out;
  if (values.empty()) return {{"count", 0}};
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (T v : values) sum += v;
  auto at = [&](double q) {
    return values[std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1)))];
  };
  out["count"] = values.size();
  out["min"] = values.front();
  out["mean"] = std::round(sum / values.size() * 1000) / 1000;
  out["p50"] = at(0.5);
  out["p95"] = at(0.95);
  out["max"] = values.back();
  ojson bins = ojson::array();
  for (size_t b = 0; b < edges.size(); ++b) {
    const bool last = b + 1 == edges.size();
    const auto lo = std::lower_bound(values.begin(), values.end(), edges[b]);
    const auto hi =
        last ? values.end() : std::lower_bound(values.begin(), values.end(), edges[b + 1]);
    ojson bin = {{"from", Edge(edges[b])},
                 {"to", last ? ojson(nullptr) : Edge(edges[b + 1])},
                 {"count", hi - lo}};
    bins.push_back(std::move(bin));
  }
  out["histogram"] = std::move(bins);
  return out;
}

std::vector<double> Steps(double from, double step, int n) {
  std::vector<double> e;
  for (int i = 0; i < n; ++i) e.push_back(from + step * i);
  return e;
}

}  // namespace

void SetStats::AddCaption(size_t tokens, size_t unk, std::string_view text) {
  tokens_ += static_cast<int64_t>(tokens);
  unk_ += static_cast<int64_t>(unk);
  caption_tokens_.push_back(static_cast<int32_t>(tokens));
  caption_chars_.push_back(static_cast<int32_t>(CodePoints(text)));
}

void SetStats::AddSample(size_t captions, int source_width, int source_height) {
  captions_per_image_.push_back(static_cast<int32_t>(captions));
  const int shorter = std::min(source_width, source_height);
  const int longer = std::max(source_width, source_height);
  shorter_side_.push_back(shorter);
  aspect_.push_back(shorter > 0 ? static_cast<float>(longer) / shorter : 0.0f);
}

void SetStats::AddStoredImage(int width, int height, size_t bytes) {
  stored_width_.push_back(width);
  stored_height_.push_back(height);
  stored_bytes_.push_back(static_cast<int64_t>(bytes));
}

SetStats::Mark SetStats::Position() const {
  return {tokens_, unk_, caption_tokens_.size(), captions_per_image_.size()};
}

nlohmann::json SetStats::Tail(const Mark& from) const {
  auto after = [](const auto& v, size_t at) {
    return nlohmann::json(std::vector<typename std::decay_t<decltype(v)>::value_type>(
        v.begin() + static_cast<std::ptrdiff_t>(at), v.end()));
  };
  return {{"tokens", tokens_ - from.tokens},
          {"unk_tokens", unk_ - from.unk},
          {"caption_tokens", after(caption_tokens_, from.captions)},
          {"caption_chars", after(caption_chars_, from.captions)},
          {"captions_per_image", after(captions_per_image_, from.samples)},
          {"shorter_side", after(shorter_side_, from.samples)},
          {"aspect", after(aspect_, from.samples)},
          {"stored_width", after(stored_width_, from.samples)},
          {"stored_height", after(stored_height_, from.samples)},
          {"stored_bytes", after(stored_bytes_, from.samples)}};
}

bool SetStats::AppendTail(const nlohmann::json& tail) {
  try {
    SetStats t;
    t.tokens_ = tail.at("tokens").get<int64_t>();
    t.unk_ = tail.at("unk_tokens").get<int64_t>();
    tail.at("caption_tokens").get_to(t.caption_tokens_);
    tail.at("caption_chars").get_to(t.caption_chars_);
    tail.at("captions_per_image").get_to(t.captions_per_image_);
    tail.at("shorter_side").get_to(t.shorter_side_);
    tail.at("aspect").get_to(t.aspect_);
    tail.at("stored_width").get_to(t.stored_width_);
    tail.at("stored_height").get_to(t.stored_height_);
    tail.at("stored_bytes").get_to(t.stored_bytes_);
    const size_t n = t.captions_per_image_.size();
    if (t.caption_chars_.size() != t.caption_tokens_.size() || t.shorter_side_.size() != n ||
        t.aspect_.size() != n || t.stored_width_.size() != n || t.stored_height_.size() != n ||
        t.stored_bytes_.size() != n) {
      return false;
    }
    auto append = [](auto* to, const auto& from) { to->insert(to->end(), from.begin(), from.end()); };
    tokens_ += t.tokens_;
    unk_ += t.unk_;
    append(&caption_tokens_, t.caption_tokens_);
    append(&caption_chars_, t.caption_chars_);
    append(&captions_per_image_, t.captions_per_image_);
    append(&shorter_side_, t.shorter_side_);
    append(&aspect_, t.aspect_);
    append(&stored_width_, t.stored_width_);
    append(&stored_height_, t.stored_height_);
    append(&stored_bytes_, t.stored_bytes_);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

ojson SetStats::ToJson() const {
  ojson out;
  out["samples"] = captions_per_image_.size();
  out["captions"] = caption_tokens_.size();
  out["tokens"] = tokens_;
  out["unk_tokens"] = unk_;
  out["unk_rate"] = UnkRate();
  out["caption_tokens"] = Describe(caption_tokens_, Steps(0, 8, 11));
  out["caption_chars"] = Describe(caption_chars_, Steps(0, 25, 13));
  out["captions_per_image"] = Describe(captions_per_image_, Steps(1, 1, 10));
  out["source_shorter_side"] = Describe(shorter_side_, Steps(0, 128, 13));
  out["source_aspect"] = Describe(aspect_, Steps(1, 0.25, 13));
  out["stored_width"] = Describe(stored_width_, Steps(0, 64, 13));
  out["stored_height"] = Describe(stored_height_, Steps(0, 64, 13));
  out["stored_bytes"] = Describe(stored_bytes_, Steps(0, 8192, 13));
  return out;
}

}  // namespace mm::pack
