// input_format.h: the input formats of `mmpack build` (ingest.h says what each one is).
#pragma once

#include <optional>
#include <string_view>

namespace mm::pack {

/// The layout of `mmpack build`'s input (ingest.h). Parsed once from --input-format;
/// ToString's text is what report.json ("input_format") and index.json
/// ("build_options.input_format") store.
// kFeed: samples streamed on stdin by a program (mmpack.Writer; ingest/feed.h), never detected.
enum class InputFormat { kAuto, kFiles, kJsonl, kCsv, kTsv, kCoco, kWds, kFeed };
inline constexpr InputFormat kInputFormats[] = {
    InputFormat::kAuto, InputFormat::kFiles, InputFormat::kJsonl, InputFormat::kCsv,
    InputFormat::kTsv,  InputFormat::kCoco,  InputFormat::kWds,   InputFormat::kFeed};
std::string_view ToString(InputFormat format);
/// "auto" | "files" | "jsonl" | "csv" | "tsv" | "coco" | "wds" | "feed"; nullopt for anything else.
std::optional<InputFormat> ParseInputFormat(std::string_view text);

}  // namespace mm::pack
