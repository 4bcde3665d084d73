// mm/internal/set_rules.h: what a shard set must satisfy for the reader and mmtrain to use it,
// written once. ShardSet::Open checks every rule when it opens a set (the set-level ones from
// index.json, the per-shard ones over each shard's mapped tables); `mmpack verify` calls the
// same functions, so what verify accepts the reader accepts, and the reverse.
//
// Internal: other mmpack libraries get it by linking mm_reader_internal PRIVATE
// (reader/CMakeLists.txt); it is compiled into mm_reader (reader/src/shard/set_rules.cc).
//
// The rules (schemas/FORMAT.md says the same):
//   - image sides in [1, kMaxImageSide] pixels, 3 channels; format 2: codec raw or jpeg, a jpeg
//     set at version 2 with quality 1..100 and compression "none", the keep-ratio modes only
//     with jpeg and image height = width = max_size; each stored JPEG's size (CheckImageSizes);
//   - tokenizer: vocab_size >= 1; pad_id and unk_id in [0, vocab_size); bos_id and eos_id -1
//     (none) or in [0, vocab_size); max_tokens >= 1;
//   - tables: little-endian two's complement int32/int64 as the spec types them, uint8 pixels,
//     fixed-length strings for keys;
//   - per shard: caption_offsets runs from 0 to C strictly increasing (every sample has a
//     caption); token_offsets from 0 to T never decreasing; no caption longer than max_tokens;
//     every token id in [0, vocab_size) (an id outside it made mmtrain fail ten steps in with
//     "index out of range in self", naming no sample).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mm/internal/index_json.h"
#include "mm/metadata.h"
#include "mm/reader.h"
#include "mm/status.h"

namespace mm::reader {

/// The largest image side, in pixels, that a set may state (index.json's image height and
/// width). One 8192 x 8192 RGB image is 192 MiB; beyond it a stated size is taken as damage, not
/// a training set (a 37000-px side would make a reader allocate 4 GB per image).
inline constexpr int kMaxImageSide = 8192;

/// Checks the names of kept manifest fields (index.json "metadata.fields", `--keep-fields`):
/// each 1..kMaxMetadataFieldName bytes of [A-Za-z0-9_.-], not "." or "..", no name twice (a
/// name is an HDF5 link in the shard's metadata group: no '/', nothing that escapes it).
/// Errors: InvalidArgument naming the first bad name.
Status CheckMetadataFieldNames(const std::vector<std::string>& names);

/// The value type a kept-field column's HDF5 file type `type` holds (schemas/FORMAT.md "Kept
/// fields"): kInt for int64 LE, kFloat for float64 LE, kString for variable-length UTF-8
/// strings; kMissing for any other type (not a column the format allows). The one place that
/// says which types a column may have: the reader, `mmpack show` and `mmpack verify` ask it.
MetadataValue::Type MetadataColumnType(hid_t type);

/// Checks the set-level rules on index.json's contents (also CheckMetadataFieldNames, as a
/// Corruption).
/// Errors: Corruption ("index.json: tokenizer pad_id 30000 outside [0, 30000)").
Status CheckSetRules(const internal::IndexDocument& doc);

/// Checks one shard's image_size table ([n, 2] int32 [width, height], codec jpeg): each side in
/// [1, kMaxImageSide]; the set's size in the fixed-size modes; the bounded side (shorter for
/// keep-ratio, longer for keep-ratio-largest) at most max_size.
/// Errors: Corruption naming the shard and sample.
Status CheckImageSizes(const std::string& shard, const int32_t* sizes, int64_t n,
                       const SetInfo& info);

/// One shard's ragged tables, as little-endian bytes in a mapping or a vector (need not be
/// aligned).
struct TokenTables {
  int64_t samples = 0;                    // N
  int64_t captions = 0;                   // C
  int64_t tokens = 0;                     // T
  const void* caption_offsets = nullptr;  // [N + 1] int64
  const void* token_offsets = nullptr;    // [C + 1] int64
  const void* token_ids = nullptr;        // [T] int32 (may be null when T == 0)
};

/// Checks the per-shard rules on `t`: offsets, caption lengths against info.max_tokens, token
/// ids against info.vocab_size. One pass over each table (the token ids in a loop the compiler
/// vectorises; the offending id, if any, is then found and named). Returns the longest caption,
/// in tokens. Errors: Corruption naming `shard`, the sample and the caption
/// ("shard-000003.h5 sample 17 caption 2: token id 30007 at position 4 outside the vocabulary
/// [0, 30000)").
Result<int64_t> CheckTokenTables(const std::string& shard, const TokenTables& t,
                                 const SetInfo& info);

/// The HDF5 types the format allows for a table.
enum class TableType {
  kUint8,        // H5T_STD_U8LE (pixels)
  kInt32,        // H5T_STD_I32LE
  kInt64,        // H5T_STD_I64LE
  kFixedString,  // fixed-length string of 1..65536 bytes (keys)
};

/// Checks HDF5 datatype `type` against `expected`: class, size, byte order, sign.
/// Errors: Corruption ("<where> is not int64 little-endian").
Status CheckTableType(hid_t type, TableType expected, const std::string& where);

}  // namespace mm::reader
