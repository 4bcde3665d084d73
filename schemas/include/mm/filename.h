// mm/filename.h: the file names of a shard set, each built and parsed here only (after
// LevelDB's db/filename.h). A set's folder holds:
//   index.json            kIndexFile (mm/format.h), written last
//   report.json           kReportFile
//   tokenizer.model       kTokenizerFile
//   shard-000000.h5 ...   ShardFileName(i): "shard-" + i in at least 6 decimal digits + ".h5"
//   shard-000007.h5.tmp   TempShardFileName(i): a shard being written (renamed when complete)
// A shard's name depends on its index alone, so index.json's list can be checked against it
// (`mmpack verify`) and a leftover shard beyond the list found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mm::format {

/// "shard-000007.h5" for `index` 7 (>= 0; more digits past 999999).
std::string ShardFileName(int64_t index);

/// The name a shard has while it is written: ShardFileName(index) + ".tmp".
std::string TempShardFileName(int64_t index);

/// The inverse of ShardFileName: true and `*index` set when `name` is "shard-" + decimal
/// digits (at least one) + ".h5", with no directory part. `index` may be null.
bool ParseShardFileName(std::string_view name, int64_t* index);

}  // namespace mm::format
