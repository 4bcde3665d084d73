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

/// A JSON value as a kept field (ingest.h, FieldValue): integers (kUint above int64), floats,
/// strings, booleans as 0/1; null, arrays and objects are missing.
FieldValue JsonField(const nlohmann::json& v);

/// The captions `obj` holds under `plan`: a string is one caption, an array's strings are
/// several; the first present field only, or every present one (FieldPlan).
std::vector<std::string> JsonCaptions(const nlohmann::json& obj, const FieldPlan& plan);

}  // namespace mm::pack
