// stats.h: what a build wrote, measured as it is written (`mmpack build` keeps it in
// report.json "stats"; `mmpack stats OUT` prints it, commands/stats.cc), after img2dataset's
// stats.json: caption lengths in tokens and characters, captions per image, the <unk> rate,
// the source images' sizes and aspect ratios.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace mm::pack {

/// Figures of the written samples. Not thread-safe (the build's serial sink feeds it).
class SetStats {
 public:
  /// One written caption: its stored token ids (bos/eos included), how many are <unk>, and its
  /// text (UTF-8; characters are code points).
  void AddCaption(size_t tokens, size_t unk, std::string_view text);
  /// One written sample: its caption count and its source size in pixels (after EXIF
  /// orientation).
  void AddSample(size_t captions, int source_width, int source_height);

  /// One written sample's stored image: its size in pixels and its stored bytes (the JPEG, or
  /// the compressed chunk).
  void AddStoredImage(int width, int height, size_t bytes);

  int64_t tokens() const { return tokens_; }
  int64_t unk_tokens() const { return unk_; }
  /// unk_tokens / tokens, 0 when there are no tokens.
  double UnkRate() const { return tokens_ > 0 ? static_cast<double>(unk_) / tokens_ : 0.0; }

  /// {"samples", "captions", "unk_rate", "unk_tokens", "tokens",
  ///  "caption_tokens"|"caption_chars"|"captions_per_image"|"source_shorter_side"|
  ///  "source_aspect"|"stored_width"|"stored_height"|"stored_bytes":
  ///                   {"min", "mean", "p50", "p95", "max",
  ///                    "histogram": [{"from": x, "to": y, "count": n}, ...]}}
  /// "from" inclusive, "to" exclusive; the bins are fixed per figure (at most 16).
  nlohmann::ordered_json ToJson() const;

  /// Each figure as counts of its distinct values, so that memory follows how many different
  /// values there are (bounded by the figures' ranges: token counts by --max-tokens, sides by
  /// 65535 pixels...), not how many samples. The aspect ratio is counted to 1/10000.
  struct Counts {
    std::map<int64_t, int64_t> caption_tokens, caption_chars, captions_per_image, shorter_side,
        aspect, stored_width, stored_height, stored_bytes;  // aspect: longer / shorter * 10000
  };

  /// How far the figures have come: a position to take the later ones from (Tail). Holds a
  /// copy of the counts (bounded, as Counts).
  struct Mark {
    int64_t tokens = 0, unk = 0;
    std::shared_ptr<const Counts> counts;
  };
  Mark Position() const;
  /// The figures added since `from` (a Position of this SetStats), exactly, as JSON; a SetStats
  /// at `from` that appends them with AppendTail holds the same figures as this one. The
  /// checkpoints of `mmpack build --resume` (commands/build_resume.h) keep them per shard.
  nlohmann::json Tail(const Mark& from) const;
  /// Appends a Tail. False (and nothing appended) when `tail` is not one.
  bool AppendTail(const nlohmann::json& tail);

 private:
  int64_t tokens_ = 0, unk_ = 0, captions_ = 0, samples_ = 0;
  Counts counts_;
};

}  // namespace mm::pack
