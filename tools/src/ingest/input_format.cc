// input_format.cc: see input_format.h.
#include "ingest/input_format.h"

#include <utility>

namespace mm::pack {
namespace {

constexpr std::pair<InputFormat, std::string_view> kNames[] = {
    {InputFormat::kAuto, "auto"}, {InputFormat::kFiles, "files"}, {InputFormat::kJsonl, "jsonl"},
    {InputFormat::kCsv, "csv"},   {InputFormat::kTsv, "tsv"},     {InputFormat::kCoco, "coco"},
    {InputFormat::kWds, "wds"},   {InputFormat::kFeed, "feed"}};

}  // namespace

std::string_view ToString(InputFormat format) {
  for (const auto& [f, name] : kNames) {
    if (f == format) return name;
  }
  return "auto";
}

std::optional<InputFormat> ParseInputFormat(std::string_view text) {
  for (const auto& [f, name] : kNames) {
    if (name == text) return f;
  }
  return std::nullopt;
}

}  // namespace mm::pack
