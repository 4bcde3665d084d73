// verifier.h: one shard file checked end to end against the embedded schema
// (schemas/shard_v1.json, mm::format::SchemaJson()) and what index.json says of it: root
// attributes, every dataset's dtype, rank, shape, layout, chunking and filter, the counts and
// offsets of the ragged tables, token ids inside the vocabulary, keys unique in the set and
// UTF-8, sources and captions UTF-8, sizes and boxes, and every image chunk decoded. The first
// problem stops it. `mmpack verify` (commands/verify.cc) runs it on each shard of a set.
// Not thread-safe: one ShardVerifier per thread.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "mm/format.h"
#include "mm/status.h"

namespace mm::pack {

/// What one shard must hold, from the index.
struct ShardExpectation {
  std::string file;
  int64_t index = 0;
  int64_t samples = 0;
  int64_t captions = 0;
  int64_t tokens = 0;
  int64_t height = 0;
  int64_t width = 0;
  format::Codec compression = format::Codec::kZstd;
  // Format 2: how images are stored, and what bounds their sizes (index.json "image").
  int format_version = 1;
  format::ImageCodec codec = format::ImageCodec::kRaw;
  int jpeg_quality = 0;
  std::optional<format::ResizeMode> resize_mode;  // nullopt: index.json names none known
  std::string resize_mode_text;                   // what index.json says (ResizeModeText)
  int max_size = 0;
  int64_t jpeg_bytes = 0;  // codec jpeg: image_offsets[N] (the "B" of the schema), read by Verify
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;                    // 0: unknown, token ids not range-checked
  std::vector<std::string> metadata_fields;  // index.json "metadata.fields"
};

class ShardVerifier {
 public:
  /// `schema`: the parsed shard_v1.json; `keys`: every key seen so far in the set (Verify adds
  /// the shard's). Both must outlive the verifier.
  ShardVerifier(const nlohmann::json& schema, std::unordered_set<std::string>* keys)
      : schema_(schema), keys_(keys) {}

  /// Checks the shard file `path` (whose size and checksum the caller has checked). `sample`
  /// is set to the first bad sample, or -1 when the problem is not one sample's.
  /// Errors: Corruption (the first problem), Unsupported (another format version).
  [[nodiscard]] Status Verify(const std::string& path, const ShardExpectation& e, int64_t* sample);

  /// The keys of the shard last verified (once its keys were read), to name a bad sample.
  const std::vector<std::string>& keys_of_shard() const { return keys_of_shard_; }

 private:
  Status CheckAttributes(hid_t file, const ShardExpectation& e);
  Status CheckDataset(hid_t file, const nlohmann::json& d, const ShardExpectation& e);
  Status CheckTables(hid_t file, const ShardExpectation& e, int64_t* sample);
  Status CheckKeys(hid_t file, const ShardExpectation& e, int64_t* sample);
  Status CheckChunks(hid_t file, const ShardExpectation& e, int64_t* sample);
  Status CheckJpegs(hid_t file, const ShardExpectation& e, const std::vector<int64_t>& offsets,
                    int64_t* sample);
  Status CheckMetadata(hid_t file, const ShardExpectation& e, int64_t* sample);

  const nlohmann::json& schema_;
  std::unordered_set<std::string>* keys_;
  std::vector<std::string> keys_of_shard_;
};

}  // namespace mm::pack
