// filters.h: what `mmpack build` leaves out on purpose (--min-size, --max-aspect, --min-tokens,
// --drop-long-captions, --min-score, --dedup), each with a report.json reason:
//
//   image_too_small         shorter source side (after EXIF orientation) < --min-size pixels
//   aspect_ratio_too_large  longer / shorter source side > --max-aspect
//   too_few_tokens          a caption of fewer than --min-tokens pieces (bos/eos not counted);
//                           a caption reason: the sample is dropped when none is left
//   caption_too_long        a caption over --max-tokens with --drop-long-captions (instead of
//                           cutting it); a caption reason, as above
//   score_below_min         the manifest field of --min-score FIELD=VALUE is below VALUE
//   score_missing           ... is absent or not a number
//   duplicate_exact         same decoded pixels as an earlier sample (dedup.h)
//   duplicate_near          perceptual hash within the Hamming threshold of an earlier sample
//
// The decisions depend only on each sample's bytes and on the samples before it in input
// order, never on timing: the same set at any --threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mm/status.h"

namespace mm::pack {

struct RawSample;
struct IngestIssue;

/// --dedup: off | exact | near (dedup.h).
enum class DedupMode { kOff, kExact, kNear };
constexpr std::string_view ToString(DedupMode m) {
  return m == DedupMode::kExact ? "exact" : m == DedupMode::kNear ? "near" : "off";
}
inline constexpr DedupMode kDedupModes[] = {DedupMode::kOff, DedupMode::kExact, DedupMode::kNear};
constexpr std::optional<DedupMode> ParseDedupMode(std::string_view text) {
  for (DedupMode m : kDedupModes) {
    if (text == ToString(m)) return m;
  }
  return std::nullopt;
}

/// Hamming distance of two 64-bit perceptual hashes at or below which --dedup near calls two
/// images duplicates (dedup.h says how it was chosen).
inline constexpr int kDefaultNearThreshold = 10;

struct FilterOptions {
  int min_size = 0;       // pixels, shorter source side; 0: off
  double max_aspect = 0;  // longer/shorter source side; 0: off
  int min_tokens = 0;     // pieces per caption, specials excluded; 0: off
  bool drop_long_captions = false;
  std::string min_score_field;  // empty: off
  double min_score = 0;
  DedupMode dedup = DedupMode::kOff;
  int near_threshold = kDefaultNearThreshold;  // bits of 64
};

/// Parses "FIELD=VALUE" (VALUE a number) into `o.min_score_field` and `o.min_score`.
/// Errors: InvalidArgument naming the expected form.
[[nodiscard]] Status ParseMinScore(const std::string& text, FilterOptions* o);

/// The source-size filters: nullptr to keep, else the reason (image_too_small,
/// aspect_ratio_too_large); `detail` says the figures.
const char* CheckSourceSize(int width, int height, const FilterOptions& o, std::string* detail);

/// The caption filters for one tokenized caption of `pieces` pieces (specials excluded), cut
/// or not: nullptr to keep, else too_few_tokens or caption_too_long.
const char* CheckCaptionLength(int pieces, bool truncated, const FilterOptions& o);

/// --min-score for one sample: true (and `dropped` set: score_missing / score_below_min) when
/// its field `o.min_score_field` (at `field_index` of RawSample::fields) is missing or below
/// the bound; false when it stays (or there is no --min-score).
bool DropsForScore(const FilterOptions& o, size_t field_index, const RawSample& s,
                   IngestIssue* dropped);

}  // namespace mm::pack
