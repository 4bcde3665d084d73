// fields.h: which manifest fields hold the image, the captions and the kept values (private
// to ingest/; the JSONL and CSV/TSV readers share these rules, ingest.h states them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ingest/ingest.h"

namespace mm::pack {

/// FieldNames with the defaults filled in, and whether captions come from the first present
/// field only (the defaults) or from every present one (--caption-field).
struct FieldPlan {
  std::vector<std::string> image;
  std::vector<std::string> caption;
  bool every_caption_field = false;
  std::vector<std::string> extra;

  explicit FieldPlan(const FieldNames& names);
  /// "image, image_path" for messages.
  static std::string List(const std::vector<std::string>& names);
};

/// Column positions of a CSV/TSV header for a FieldPlan (-1: absent), names matched without
/// regard to ASCII case and surrounding blanks.
struct ColumnPlan {
  int image = -1;
  std::vector<int> captions;  // at least one when the header is usable
  std::vector<int> extra;     // one per FieldPlan::extra, -1 where absent
};
ColumnPlan PlanColumns(const std::vector<std::string>& header, const FieldPlan& plan);

}  // namespace mm::pack
