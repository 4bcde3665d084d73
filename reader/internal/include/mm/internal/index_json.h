// mm/internal/index_json.h: a shard set's index.json (schemas/FORMAT.md, "index.json"),
// encoded and decoded here only (after LevelDB's BlockHandle::EncodeTo beside DecodeFrom).
// The writer (`mmpack build`) encodes; ShardSet::Open, `mmpack info` and `mmpack verify` decode
// with the same strict decoder.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/set/index_json.cc); the reader's tests and fuzz target call it too.
// Thread-safe: pure functions (ReadIndexText reads a file).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "mm/format.h"
#include "mm/reader.h"
#include "mm/status.h"
#include "mm/version.h"

namespace mm::reader::internal {

/// Everything index.json holds. `info` is what the reader uses (its `root` is not stored);
/// the rest is for `mmpack info` and `mmpack verify`.
struct IndexDocument {
  SetInfo info;
  std::string created_by = "mmpack " + std::string(kVersion);
  std::string background;  // image.background, "#rrggbb"; empty when absent
  // image.resize_mode when it names no mode this reader knows (info.resize_mode is then
  // nullopt), kept so that `mmpack info` and `verify` say what the file says; empty otherwise.
  std::string other_resize_mode;
  int hdf5_filter_id = -1;     // compression.hdf5_filter_id as stored; -1 when absent
  std::string tokenizer_file;  // tokenizer.file as stored (not checked: a name or a path)
  // tokenizer.kind: which tokenizer made the ids (absent in the file: sentencepiece)
  mm::format::TokenizerKind tokenizer_kind = mm::format::TokenizerKind::kSentencePiece;
  bool tokenizer_trained = false;
  nlohmann::ordered_json build_options = nlohmann::ordered_json::object();
  /// "totals" as stored (-1 where absent). EncodeIndex writes the sums over info.shards.
  struct Totals {
    int64_t shards = -1, samples = -1, captions = -1, tokens = -1, bytes = -1;
  } totals;
  /// dropped.by_reason: samples dropped by the build, by reason. EncodeIndex writes their sum
  /// as dropped.total; decoded, dropped_total is the stored total (-1 when absent).
  std::map<std::string, int64_t> dropped_by_reason;
  int64_t dropped_total = -1;
};

/// image.resize_mode as index.json says it: ToString(*doc.info.resize_mode), else
/// doc.other_resize_mode ("" when absent).
std::string ResizeModeText(const IndexDocument& doc);

/// The text of index.json for `doc`: format name and version (mm/format.h), created_by, image,
/// compression (codec info.compression; for zstd its level and filter id 32015, for none 0 and
/// 0), tokenizer (file kTokenizerFile when tokenizer_file is empty), build_options, shards,
/// totals summed over info.shards, dropped. Indented by 2, newline-terminated; invalid UTF-8
/// in strings becomes U+FFFD. The same document gives the same bytes.
std::string EncodeIndex(const IndexDocument& doc);

/// Parses the text of index.json; info.root is set to `root`.
/// Checks: valid JSON; "format" is "mmpack-shard"; "format_version" in
/// [kMinReadableVersion, kFormatVersion]; image size positive with 3 channels; image.codec (when
/// present) "raw" or "jpeg"; compression.codec "zstd" or "none" (each parsed here into
/// mm/format.h's enum); the tokenizer's ids present; every shard entry complete, its file a plain
/// name (no directory part), its counts non-negative with captions >= samples; totals.shards,
/// .samples and .captions, where present, equal the sums over shards. Optional fields (created_by,
/// image.resize_mode and .background, compression.level and .hdf5_filter_id, tokenizer.file,
/// .kind, .sha256 and .trained, build_options, dropped) are taken when present with the right
/// type; a tokenizer.kind this reader does not know is Unsupported.
/// Errors: Corruption (malformed or inconsistent), Unsupported (another format name or
/// version, naming it and the readable range; an unknown codec).
[[nodiscard]] Result<IndexDocument> DecodeIndex(std::string_view text, const std::string& root);

/// DecodeIndex(text, root).info: what the reader needs.
[[nodiscard]] Result<SetInfo> ParseIndex(std::string_view text, const std::string& root);

/// The text of `dir`/index.json, read without blocking on a FIFO (mm/internal/file.h).
/// Errors: NotFound ("DIR/index.json: cannot open (not a shard set?)"), IOError (not a regular
/// file, unreadable).
[[nodiscard]] Result<std::string> ReadIndexText(const std::string& dir);

}  // namespace mm::reader::internal
