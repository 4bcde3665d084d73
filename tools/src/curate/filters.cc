// filters.cc: see filters.h.
#include "curate/filters.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "ingest/ingest.h"

namespace mm::pack {

Status ParseMinScore(const std::string& text, FilterOptions* o) {
  const size_t eq = text.rfind('=');
  const auto bad = [&] {
    return Status::InvalidArgument(
        "--min-score must be FIELD=VALUE with a number VALUE (e.g. "
        "clip_score=0.28), got '" +
        text + "'");
  };
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return bad();
  const std::string value = text.substr(eq + 1);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end != value.c_str() + value.size() || v != v) return bad();
  o->min_score_field = text.substr(0, eq);
  o->min_score = v;
  return Status::OK();
}

const char* CheckSourceSize(int width, int height, const FilterOptions& o, std::string* detail) {
  const int shorter = std::min(width, height), longer = std::max(width, height);
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (o.min_size > 0 && shorter < o.min_size) {
    *detail = size + ": shorter side " + std::to_string(shorter) + " < --min-size " +
              std::to_string(o.min_size);
    return "image_too_small";
  }
  if (o.max_aspect > 0 && shorter > 0 && static_cast<double>(longer) / shorter > o.max_aspect) {
    *detail = size + ": aspect ratio " + std::to_string(static_cast<double>(longer) / shorter) +
              " > --max-aspect " + std::to_string(o.max_aspect);
    return "aspect_ratio_too_large";
  }
  return nullptr;
}

const char* CheckCaptionLength(int pieces, bool truncated, const FilterOptions& o) {
  if (o.min_tokens > 0 && pieces < o.min_tokens) return "too_few_tokens";
  if (o.drop_long_captions && truncated) return "caption_too_long";
  return nullptr;
}

bool DropsForScore(const FilterOptions& o, size_t field_index, const RawSample& s,
                   IngestIssue* dropped) {
  if (o.min_score_field.empty()) return false;
  std::optional<double> score;
  if (field_index < s.fields.size()) {
    const FieldValue& v = s.fields[field_index];
    score =
        v.type == FieldValue::Type::kString ? FieldValue::FromText(v.s).AsNumber() : v.AsNumber();
  }
  if (!score) {
    *dropped = {s.source, s.key, "score_missing",
                "no number in field '" + o.min_score_field + "' (--min-score)"};
    return true;
  }
  if (*score < o.min_score) {
    *dropped = {s.source, s.key, "score_below_min",
                o.min_score_field + " = " + std::to_string(*score) + " < " +
                    std::to_string(o.min_score)};
    return true;
  }
  return false;
}

}  // namespace mm::pack
