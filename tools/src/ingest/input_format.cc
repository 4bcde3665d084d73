// input_format.cc: see input_format.h.
#include "ingest/input_format.h"

namespace mm::pack {

std::string_view ToString(InputFormat format) {
  switch (format) {
    case InputFormat::kFiles:
      return "files";
    case InputFormat::kJsonl:
      return "jsonl";
    case InputFormat::kCsv:
      return "csv";
    case InputFormat::kTsv:
      return "tsv";
    case InputFormat::kCoco:
      return "coco";
    case InputFormat::kWds:
      return "wds";
    case InputFormat::kAuto:
      break;
  }
  return "auto";
}

std::optional<InputFormat> ParseInputFormat(std::string_view text) {
  for (InputFormat f : kInputFormats) {
    if (text == ToString(f)) return f;
  }
  return std::nullopt;
}

}  // namespace mm::pack
