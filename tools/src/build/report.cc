// report.cc: see build_report.h.
#include "build/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "set/human_bytes.h"

namespace mm::pack {

using ojson = nlohmann::ordered_json;

std::map<std::string, int64_t> BuildReport::ByReason() const {
  std::map<std::string, int64_t> by_reason;
  for (const DropEntry& d : dropped) ++by_reason[d.reason];
  return by_reason;
}

std::string BuildReport::ReasonsText() const {
  std::string text;
  for (const auto& [reason, n] : ByReason()) {
    text += (text.empty() ? "" : ", ") + reason + " " + std::to_string(n);
  }
  return text;
}

std::string ReportJson(const BuildOptions& o, InputFormat format, const BuildReport& r) {
  ojson report;
  report["input"] = o.input;
  report["input_format"] = std::string(ToString(format));
  report["samples_seen"] = r.written + static_cast<int64_t>(r.dropped.size());
  report["samples_written"] = r.written;
  ojson dropped_json = ojson::array();
  for (const DropEntry& d : r.dropped) {
    dropped_json.push_back(
        {{"source", d.source}, {"key", d.key}, {"reason", d.reason}, {"detail", d.detail}});
  }
  report["dropped"] = std::move(dropped_json);
  report["dropped_by_reason"] = ojson::object();
  for (const auto& [reason, n] : r.ByReason()) report["dropped_by_reason"][reason] = n;
  ojson captions_json = ojson::array();
  std::map<std::string, int64_t> caption_reasons;
  for (const DroppedCaption& d : r.dropped_captions) {
    captions_json.push_back({{"source", d.source},
                             {"key", d.key},
                             {"caption_index", d.caption_index},
                             {"reason", d.reason}});
    ++caption_reasons[d.reason];
  }
  report["dropped_captions"] = std::move(captions_json);
  report["dropped_captions_by_reason"] = ojson::object();
  for (const auto& [reason, n] : caption_reasons) {
    report["dropped_captions_by_reason"][reason] = n;
  }
  report["truncated_captions"] = r.truncated;
  report["stats"] = r.stats.ToJson();
  return report.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

void PrintSummary(const BuildOptions& o, const BuildReport& r,
                  const std::vector<mm::reader::ShardEntry>& shards, double seconds) {
  if (!o.quiet) {
    for (const auto& [reason, n] : r.ByReason()) {
      std::fprintf(stderr, "mmpack build: dropped %s: %lld\n", reason.c_str(),
                   static_cast<long long>(n));
    }
    if (!r.dropped_captions.empty()) {
      std::fprintf(stderr,
                   "mmpack build: %zu caption(s) dropped from kept samples or with "
                   "their sample (see report.json)\n",
                   r.dropped_captions.size());
    }
  }
  int64_t total_bytes = 0;
  for (const auto& s : shards) total_bytes += s.bytes;
  const bool dropped = !r.dropped.empty();
  std::fprintf(stderr,
               "mmpack build: wrote %lld samples (%lld captions, %lld truncated) in %zu "
               "shard(s), %s (%s a sample), dropped %zu%s%s%s, %.1f s (%.1f samples/s) -> %s\n",
               static_cast<long long>(r.written), static_cast<long long>(r.written_captions),
               static_cast<long long>(r.truncated), shards.size(),
               HumanBytes(static_cast<double>(total_bytes)).c_str(),
               HumanBytes(static_cast<double>(total_bytes) / r.written).c_str(), r.dropped.size(),
               dropped ? " (" : "", dropped ? r.ReasonsText().c_str() : "", dropped ? ")" : "",
               seconds, seconds > 0 ? r.written / seconds : 0.0, o.output.c_str());
}

}  // namespace mm::pack
