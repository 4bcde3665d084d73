// append.h: `mmpack build RAW -o OUT --append`: the samples of RAW added
// to the existing set OUT as new shards, numbered after OUT's.
//
// How it stays safe: the new set is assembled in the staging folder beside OUT like any build,
// OUT's shards, tokenizer and report hard-linked into it (no copy, nothing of OUT changed), the
// new shards written there, then a merged index.json and report.json; Publish (set_publish.h)
// swaps the folders in one rename, so a reader sees the old set or the new one, never a mix,
// and a failed or killed append leaves OUT as it was. Appending needs what the set fixes: the
// same image options (size, resize mode, codec, quality, max size, compression, background),
// tokenizer (by SHA-256; OUT's own tokenizer.model when --tokenizer is not given), caption
// options and kept fields; anything else is refused with one line naming the difference. A
// sample whose key OUT already holds is dropped as duplicate_key, so keys stay unique.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "build/options.h"
#include "build/plan.h"
#include "build/report.h"
#include "build/resume.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "mm/internal/index_json.h"
#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// What an append starts from: OUT's index (the reader's strict decoder), its report.json and
/// every key it holds (read through the reader, which checks the whole set as it opens it).
struct AppendBase {
  mm::reader::internal::IndexDocument index;
  // OUT's report.json, its lists of drops left out (report_stream.h): they are streamed from
  // `report_path` into the appended report. Empty when OUT has no report.json.
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  std::filesystem::path report_path;
  std::unordered_set<std::string> keys;
  std::shared_ptr<mm::reader::ShardSet> set;  // OUT, opened by the reader
  std::vector<KeptSample> images;  // --dedup: the hashes of OUT's images (HashBaseImages)
};

/// Opens OUT (`out`: NormalOutput) as an append base. Errors: NotFound (OUT is not a set:
/// no index.json), those of ShardSet::Open (a damaged set is not appended to), Corruption (a
/// report.json that is not one: refused, so that its drops are never silently lost).
[[nodiscard]] Result<AppendBase> OpenAppendBase(const std::filesystem::path& out);

/// `o` with its tokenizer resolved against the base: OUT's tokenizer.model when none is given,
/// "none" for a text-only set; OUT's chunk compression and zstd level when neither
/// --compression nor --compression-level is given (so a set built before the default became
/// `none` still takes appends with the same command). Errors: InvalidArgument (a text-only set and
/// a tokenizer given, or the reverse).
[[nodiscard]] Result<BuildOptions> AppendOptions(const BuildOptions& o,
                                                 const std::filesystem::path& out,
                                                 const AppendBase& base);

/// Checks that this build makes what OUT holds (image options, caption options, kept fields;
/// the tokenizer by `tokenizer_sha256`). Errors: InvalidArgument, one line naming the first
/// difference.
[[nodiscard]] Status CheckAppendable(const BuildOptions& o, const ImageOptions& image,
                                     const std::string& tokenizer_sha256, const AppendBase& base);

/// --append --dedup exact|near: the --dedup hashes of every image OUT holds,
/// in set order, into `base->images`, so that a copy of one of them is dropped as a duplicate
/// and index.json's claim stays true. Each image is read back as stored (ShardSet::ReadImage,
/// on `threads` threads; 0: all cores) and hashed as the build hashes its own (for a JPEG set,
/// the build then hashes its images after the same JPEG round trip: build_pipeline.cc).
/// Errors: those of ReadImage (a damaged set is not appended to).
[[nodiscard]] Status HashBaseImages(int threads, AppendBase* base);

/// True when OUT holds `s`'s key: its drop (duplicate_key, "key already in OUT") is appended to
/// `dropped`.
bool DropsAsKeyOfBase(const AppendBase& base, const RawSample& s, std::vector<DropEntry>* dropped);

/// Completes the staging folder (plan.staging) as the appended set: OUT's shards and report
/// hard-linked in, index.json listing OUT's shards then `made.added`, report.json merged
/// (FORMAT.md "Appending").
/// Errors: IOError (a link or write failed; a file system that cannot hard-link is named).
/// What an append made: its input's format, its new shards and its report.
struct AppendMade {
  InputFormat format;
  const std::vector<mm::reader::ShardEntry>& added;
  const BuildReport& report;
};
[[nodiscard]] Status AssembleAppend(const BuildPlan& plan, const AppendBase& base,
                                    const AppendMade& made);

}  // namespace mm::pack
