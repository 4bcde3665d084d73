// mixture_report.cc: see mixture_report.h.
#include "commands/mixture_report.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "set/human_bytes.h"
#include "mm/internal/mixture.h"

namespace mm::pack {
namespace {

using ojson = nlohmann::ordered_json;

std::string WeightText(double weight) {
  if (weight <= 0) return "no weight: natural size";
  std::ostringstream s;
  s << "weight " << weight;
  return s.str();
}

// The mixture's own part of the report (the sets' figures and the totals), from its open set.
void PrintMixture(const mm::reader::ShardSet& set, std::ostream& out) {
  const auto& sets = set.sets();
  int64_t epoch = 0, tokens = 0, bytes = 0;
  for (const auto& s : sets) epoch += s.epoch_samples;
  for (const auto& e : set.info().shards) {
    tokens += e.tokens;
    bytes += e.bytes;
  }
  out << "== mixture: " << set.info().root << "\n";
  for (size_t p = 0; p < sets.size(); ++p) {
    const auto& s = sets[p];
    out << "set " << p << ":        " << s.location << " (" << WeightText(s.weight)
        << "): " << s.info.num_samples << " samples, " << s.info.image_width << "x"
        << s.info.image_height << " stored; " << s.epoch_samples << " items an epoch ("
        << std::fixed << std::setprecision(1) << (epoch > 0 ? 100.0 * s.epoch_samples / epoch : 0.0)
        << "%)\n";
  }
  out << "total:        " << set.num_samples() << " samples, " << set.info().num_captions
      << " captions, " << tokens << " tokens in " << set.num_shards() << " shards, "
      << HumanBytes(static_cast<double>(bytes)) << "; " << epoch
      << " items an epoch (caption_mode random)\n";
}

ojson MixtureJson(const mm::reader::ShardSet& set, const std::vector<ojson>& reports) {
  ojson j;
  j["mixture"] = set.info().root;
  int64_t epoch = 0, tokens = 0, bytes = 0;
  bool weighted = false;
  ojson sets = ojson::array();
  for (size_t p = 0; p < set.sets().size(); ++p) {
    const auto& s = set.sets()[p];
    epoch += s.epoch_samples;
    weighted = weighted || s.weight > 0;
    sets.push_back({{"path", s.location},
                    {"weight", s.weight > 0 ? ojson(s.weight) : ojson()},
                    {"samples", s.info.num_samples},
                    {"epoch_samples", s.epoch_samples},
                    {"report", p < reports.size() ? reports[p] : ojson()}});
  }
  for (const auto& e : set.info().shards) {
    tokens += e.tokens;
    bytes += e.bytes;
  }
  j["weighted"] = weighted;
  j["epoch_items"] = epoch;
  j["sets"] = std::move(sets);
  j["total"] = {{"samples", set.num_samples()},
                {"captions", set.info().num_captions},
                {"tokens", tokens},
                {"shards", set.num_shards()},
                {"bytes", bytes}};
  return j;
}

}  // namespace

std::optional<Status> RunOnMixture(const std::string& location, std::ostream& out, bool json,
                                   const mm::reader::RemoteOptions& remote, const SetReport& each) {
  Result<std::optional<mm::reader::internal::MixtureSpec>> spec =
      mm::reader::internal::ParseMixture(location);
  if (!spec.ok()) return spec.status();
  if (!spec->has_value()) return std::nullopt;
  const auto& sets = (*spec)->sets;
  Status first = Status::OK();
  std::vector<ojson> reports;
  for (size_t p = 0; p < sets.size(); ++p) {
    const std::string& where = sets[p].location;
    std::ostringstream one;
    if (!json) {
      out << "== set " << p << " of " << sets.size() << ": " << where << " ("
          << WeightText(sets[p].weight) << ")\n";
    }
    Status st = each(where, json ? one : out, json);
    if (json) {
      ojson parsed = ojson::parse(one.str(), nullptr, /*allow_exceptions=*/false);
      reports.push_back(parsed.is_discarded() ? ojson(nullptr) : parsed);
      if (!st.ok() && reports.back().is_null()) reports.back() = {{"error", st.ToString()}};
    }
    if (!st.ok() && first.ok()) {
      first = st.WithContext("set " + std::to_string(p) + " (" + where + ")");
    }
  }
  mm::reader::OpenOptions options;
  options.remote = remote;
  Result<std::shared_ptr<mm::reader::ShardSet>> mixed =
      mm::reader::ShardSet::Open(location, options);
  if (!mixed.ok()) {
    if (first.ok()) first = mixed.status();
    if (json)
      out << ojson{{"mixture", location}, {"ok", false}, {"error", first.ToString()}}.dump(2)
          << "\n";
    return first;
  }
  if (json) {
    ojson j = MixtureJson(**mixed, reports);
    j["ok"] = first.ok();
    out << j.dump(2) << "\n";
  } else {
    PrintMixture(**mixed, out);
  }
  return first;
}

}  // namespace mm::pack
