// set_index.h: a shard set's index.json as `mmpack info` and `mmpack verify` read it, with the
// reader's strict decoder (mm/internal/index_json.h).
#pragma once

#include <string>

#include "mm/internal/index_json.h"
#include "mm/status.h"

namespace mm::pack {

/// The decoded index.json of the set in `dir`.
/// Errors: NotFound ("DIR/index.json does not exist or cannot be read"), those of
/// ReadIndexText and DecodeIndex.
[[nodiscard]] Result<mm::reader::internal::IndexDocument> ReadSetIndex(const std::string& dir);

/// ReadSetIndex after checking the raw JSON's keys against the schema's "index" section
/// (`schema`: the parsed shard_v1.json): every required key at the top, every shard key in
/// each shard entry. Errors: Corruption ("index.json lacks 'tokenizer'"), those of ReadSetIndex.
[[nodiscard]] Result<mm::reader::internal::IndexDocument> ReadSetIndexChecked(
    const std::string& dir, const nlohmann::json& schema);

}  // namespace mm::pack
