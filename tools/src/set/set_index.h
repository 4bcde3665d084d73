// set_index.h: a shard set's index.json as `mmpack info` and `mmpack verify` read it, with the
// reader's strict decoder (mm/internal/index_json.h).
#pragma once

#include <memory>
#include <string>

#include "mm/internal/index_json.h"
#include "mm/internal/set_files.h"
#include "mm/status.h"

namespace mm::pack {

/// The decoded index.json of the set `files` (a local directory or a remote set).
/// Errors: NotFound ("DIR/index.json does not exist or cannot be read"; a remote one: HTTP
/// 404 naming the URL), those of ReadIndexText, of the transport and of DecodeIndex.
[[nodiscard]] Result<mm::reader::internal::IndexDocument> ReadSetIndex(
    const mm::reader::internal::SetFiles& files);

/// ReadSetIndex after checking the raw JSON's keys against the schema's "index" section
/// (`schema`: the parsed shard_v1.json): every required key at the top, every shard key in
/// each shard entry. Errors: Corruption ("index.json lacks 'tokenizer'"), those of ReadSetIndex.
[[nodiscard]] Result<mm::reader::internal::IndexDocument> ReadSetIndexChecked(
    const mm::reader::internal::SetFiles& files, const nlohmann::json& schema);

/// The files of the set at `location` (a directory, s3://, http(s)://) as `mmpack info` and
/// `verify` read them; a remote set's shards through the cache of `remote`.
[[nodiscard]] Result<std::unique_ptr<mm::reader::internal::SetFiles>> OpenSetFiles(
    const std::string& location, const mm::reader::RemoteOptions& remote);

}  // namespace mm::pack
