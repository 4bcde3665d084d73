// stats.cc: see stats.h.
#include "curate/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <memory>
#include <utility>

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

// The figures of Counts, by name (Tail's and AppendTail's JSON keys), and whether each counts
// samples (else captions).
struct Figure {
  const char* name;
  std::map<int64_t, int64_t> SetStats::Counts::*member;
  bool per_sample;
};
constexpr Figure kFigures[] = {
    {"caption_tokens", &SetStats::Counts::caption_tokens, false},
    {"caption_chars", &SetStats::Counts::caption_chars, false},
    {"captions_per_image", &SetStats::Counts::captions_per_image, true},
    {"shorter_side", &SetStats::Counts::shorter_side, true},
    {"aspect", &SetStats::Counts::aspect, true},
    {"stored_width", &SetStats::Counts::stored_width, true},
    {"stored_height", &SetStats::Counts::stored_height, true},
    {"stored_bytes", &SetStats::Counts::stored_bytes, true},
};

constexpr double kAspectUnit = 10000;  // Counts::aspect holds the ratio times this

// Summary and histogram of the values `counts` counts (each value divided by `unit`) over bins
// starting at `edges` (the last bin open-ended, its "to" null). p50 and p95 are the values at
// rank floor(q * (count - 1)) in sorted order, as a sorted vector's would be.
ojson Describe(const std::map<int64_t, int64_t>& counts, const std::vector<double>& edges,
               double unit = 1) {
  ojson out;
  int64_t n = 0;
  double sum = 0;
  for (const auto& [v, c] : counts) {
    n += c;
    sum += static_cast<double>(v) * static_cast<double>(c);
  }
  if (n == 0) return {{"count", 0}};
  auto value = [&](int64_t v) {
    return unit == 1 ? ojson(v) : ojson(static_cast<double>(v) / unit);
  };
  auto at = [&](double q) {
    const int64_t rank = static_cast<int64_t>(q * static_cast<double>(n - 1));
    int64_t seen = 0;
    for (const auto& [v, c] : counts) {
      seen += c;
      if (seen > rank) return v;
    }
    return counts.rbegin()->first;
  };
  out["count"] = n;
  out["min"] = value(counts.begin()->first);
  out["mean"] = std::round(sum / unit / static_cast<double>(n) * 1000) / 1000;
  out["p50"] = value(at(0.5));
  out["p95"] = value(at(0.95));
  out["max"] = value(counts.rbegin()->first);
  ojson bins = ojson::array();
  for (size_t b = 0; b < edges.size(); ++b) {
    const bool last = b + 1 == edges.size();
    int64_t in_bin = 0;
    for (const auto& [v, c] : counts) {
      const double x = static_cast<double>(v) / unit;
      if (x >= edges[b] && (last || x < edges[b + 1])) in_bin += c;
    }
    ojson bin = {{"from", Edge(edges[b])},
                 {"to", last ? ojson(nullptr) : Edge(edges[b + 1])},
                 {"count", in_bin}};
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

int64_t Total(const std::map<int64_t, int64_t>& counts) {
  int64_t n = 0;
  for (const auto& kv : counts) n += kv.second;
  return n;
}

}  // namespace

void SetStats::AddCaption(size_t tokens, size_t unk, std::string_view text) {
  tokens_ += static_cast<int64_t>(tokens);
  unk_ += static_cast<int64_t>(unk);
  ++captions_;
  ++counts_.caption_tokens[static_cast<int64_t>(tokens)];
  ++counts_.caption_chars[static_cast<int64_t>(CodePoints(text))];
}

void SetStats::AddSample(size_t captions, int source_width, int source_height) {
  ++samples_;
  ++counts_.captions_per_image[static_cast<int64_t>(captions)];
  const int shorter = std::min(source_width, source_height);
  const int longer = std::max(source_width, source_height);
  ++counts_.shorter_side[shorter];
  ++counts_.aspect[shorter > 0 ? std::llround(static_cast<double>(longer) / shorter * kAspectUnit)
                               : 0];
}

void SetStats::AddStoredImage(int width, int height, size_t bytes) {
  ++counts_.stored_width[width];
  ++counts_.stored_height[height];
  ++counts_.stored_bytes[static_cast<int64_t>(bytes)];
}

SetStats::Mark SetStats::Position() const {
  return {tokens_, unk_, std::make_shared<const Counts>(counts_)};
}

nlohmann::json SetStats::Tail(const Mark& from) const {
  static const Counts kNone;
  const Counts& before = from.counts ? *from.counts : kNone;
  nlohmann::json out = {{"tokens", tokens_ - from.tokens}, {"unk_tokens", unk_ - from.unk}};
  for (const Figure& f : kFigures) {
    const std::map<int64_t, int64_t>& now = counts_.*f.member;
    const std::map<int64_t, int64_t>& then = before.*f.member;
    nlohmann::json pairs = nlohmann::json::array();  // [value, count added], by value
    for (const auto& [v, c] : now) {
      auto it = then.find(v);
      const int64_t added = c - (it == then.end() ? 0 : it->second);
      if (added > 0) pairs.push_back({v, added});
    }
    out[f.name] = std::move(pairs);
  }
  return out;
}

bool SetStats::AppendTail(const nlohmann::json& tail) {
  try {
    Counts t;
    const int64_t tokens = tail.at("tokens").get<int64_t>();
    const int64_t unk = tail.at("unk_tokens").get<int64_t>();
    int64_t samples = -1, captions = -1;
    for (const Figure& f : kFigures) {
      std::map<int64_t, int64_t>& to = t.*f.member;
      for (const nlohmann::json& pair : tail.at(f.name)) {
        const int64_t v = pair.at(0).get<int64_t>(), c = pair.at(1).get<int64_t>();
        if (c <= 0 || !to.emplace(v, c).second) return false;
      }
      const int64_t n = Total(to);
      int64_t& expect = f.per_sample ? samples : captions;
      if (expect >= 0 && n != expect) return false;  // every figure counts the same things
      expect = n;
    }
    tokens_ += tokens;
    unk_ += unk;
    samples_ += samples;
    captions_ += captions;
    for (const Figure& f : kFigures) {
      for (const auto& [v, c] : t.*f.member) (counts_.*f.member)[v] += c;
    }
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

ojson SetStats::ToJson() const {
  ojson out;
  out["samples"] = samples_;
  out["captions"] = captions_;
  out["tokens"] = tokens_;
  out["unk_tokens"] = unk_;
  out["unk_rate"] = UnkRate();
  out["caption_tokens"] = Describe(counts_.caption_tokens, Steps(0, 8, 11));
  out["caption_chars"] = Describe(counts_.caption_chars, Steps(0, 25, 13));
  out["captions_per_image"] = Describe(counts_.captions_per_image, Steps(1, 1, 10));
  out["source_shorter_side"] = Describe(counts_.shorter_side, Steps(0, 128, 13));
  out["source_aspect"] = Describe(counts_.aspect, Steps(1, 0.25, 13), kAspectUnit);
  out["stored_width"] = Describe(counts_.stored_width, Steps(0, 64, 13));
  out["stored_height"] = Describe(counts_.stored_height, Steps(0, 64, 13));
  out["stored_bytes"] = Describe(counts_.stored_bytes, Steps(0, 8192, 13));
  return out;
}

}  // namespace mm::pack
