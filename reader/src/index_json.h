// index_json.h: parsing and checking a shard set's index.json (schemas/FORMAT.md). Private to
// mm_reader; exposed to the reader's tests and fuzz target.
#pragma once

#include <string>
#include <string_view>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::reader::internal {

/// Parses the text of index.json into a SetInfo whose `root` is `root`.
/// Checks: valid JSON; "format" is "mmpack-shard"; "format_version" in
/// [kMinReadableVersion, kFormatVersion]; image size positive with 3 channels; codec "zstd" or
/// "none"; every shard entry complete, its file a plain name (no directory part), its counts
/// non-negative with captions >= samples; totals equal the sums over shards.
/// Errors: Corruption (malformed or inconsistent), Unsupported (another format version, naming
/// it and the readable range; an unknown codec).
Result<SetInfo> ParseIndex(std::string_view text, const std::string& root);

}  // namespace mm::reader::internal
