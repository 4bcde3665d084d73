// resume.h: the checkpoints that let `mmpack build --resume` continue a build that was
// killed (SIGKILL, a power cut, a job's time limit) instead of starting it over, and end with
// the same bytes as a build that was never interrupted.
//
// A build writes in its staging folder OUT.mmpack-partial (output_dir.h):
//   .resume/build.json          once the tokenizer is made: the build's fingerprint (every
//                               option that changes the output, and the samples the input
//                               gave, after the caption checks and filters) and the tokenizer's
//                               SHA-256 and whether it was trained here
//   .resume/checkpoint-NNNNNN.json
//                               after shard NNNNNN-1 is closed, fsynced and renamed: the shards
//                               closed since the last checkpoint, what the build reported
//                               since (dropped samples and captions, stats, the hashes of
//                               --dedup), the totals, and the position in the sample list where
//                               the next shard starts
// Each file is written to a temporary name, fsynced and renamed, so a kill leaves either the
// whole file or none. A resumed build ingests the input again (the order is deterministic),
// checks the fingerprint, keeps the shards of every checkpoint whose shards are still whole
// (their XXH3-64 against the checkpoint's), replays the reports, removes what follows the last
// good checkpoint, and runs the pipeline from its position. The serial sink adds every sample in
// input order whatever --threads is, so the shards written after the resume, and index.json and
// report.json, are those of the uninterrupted build. .resume/ is removed before the set is
// published.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "build/report.h"
#include "build/options.h"
#include "ingest/ingest.h"
#include "ingest/sample_list.h"
#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// The folder of the checkpoints inside the staging folder.
inline constexpr const char* kResumeFolder = ".resume";

/// A kept sample's --dedup hashes and key, in the order the sink kept them.
struct KeptSample {
  std::string key;
  uint64_t pixel_hash = 0;
  uint64_t perceptual_hash = 0;
};

/// What the build's serial sink has done so far: what a checkpoint saves and a resume restores.
struct SinkProgress {
  size_t next_sample = 0;                     // position in the sample list
  std::vector<mm::reader::ShardEntry> shards;  // closed, in order
  int64_t pipeline_dropped = 0;               // samples the pipeline dropped (progress line)
  std::vector<KeptSample> kept;               // --dedup only
  // ChainSource over the samples consumed since the last checkpoint (their SourceStamps): what
  // the next checkpoint's shards were made from. 0 after each checkpoint.
  uint64_t sources = 0;
};

/// What a sample's image was read from, as a number: XXH3-64 of the size and modification time
/// (ns) of its file (for wds, of its tar; a tar at a URL: its size and ETag), or 0 when it
/// cannot be stat'ed (missing); 1 for an image at a URL (not asked). A file replaced between a
/// killed build and its --resume almost surely has another. Thread-safe.
uint64_t SourceStamp(const RawSample& s);

/// `chain` extended by the sample at `index` of stamp `stamp` (order matters).
uint64_t ChainSource(uint64_t chain, size_t index, uint64_t stamp);

/// ChainSource over samples [begin, end) of `samples` (their stamps taken now). Errors: those
/// of reading the list.
[[nodiscard]] Result<uint64_t> SourcesOf(const SampleList& samples, size_t begin, size_t end);

/// 32 hex digits naming the build: the options that change the output (not --threads,
/// --quiet, --overwrite or --resume), the SHA-256 of a given --tokenizer (`tokenizer_sha256`),
/// and every field of `samples` (keys, paths, captions, kept fields) in order.
/// Errors: those of reading the list.
[[nodiscard]] Result<std::string> BuildFingerprint(const BuildOptions& o,
                                                   const std::string& tokenizer_sha256,
                                                   const SampleList& samples);

/// .resume/build.json.
struct ResumeHeader {
  std::string fingerprint;
  std::string tokenizer_sha256;  // "" with --tokenizer none
  bool tokenizer_trained = false;
};

/// Creates `staging`/.resume and writes build.json. Errors: IOError.
[[nodiscard]] Status StartResumeLog(const std::filesystem::path& staging, const ResumeHeader& h);

/// `staging`/.resume/build.json; NotFound when the folder holds no resumable build (no
/// staging folder, or a build killed before its tokenizer was made). Errors: Corruption (a
/// build.json that is not one).
[[nodiscard]] Result<ResumeHeader> ReadResumeHeader(const std::filesystem::path& staging);

/// How many shard checkpoints `staging` holds (for the note that --resume exists).
int64_t CountCheckpoints(const std::filesystem::path& staging);

/// Restores the sink's progress from `staging`'s checkpoints (over `samples`: a checkpoint
/// past its end is not one of this build), appending each checkpoint's reports to `report`
/// (which holds what the build reported before its pipeline, as the interrupted build did).
/// Stops at the first checkpoint that cannot be read, whose shards are not whole on disk, or
/// whose samples' source files changed since (their SourcesOf now is not the checkpoint's), then
/// removes every later checkpoint and every shard file (and .h5.tmp) not kept, so the build goes
/// on from the last good one and makes the rest from the input as it is now. `notes` gets a
/// line for each thing not kept. Errors: IOError (a file that cannot be removed), those of
/// reading the list.
[[nodiscard]] Result<SinkProgress> LoadCheckpoints(const std::filesystem::path& staging,
                                                   const SampleList& samples, BuildReport* report,
                                                   std::vector<std::string>* notes);

/// After a build that made the tokenizer (and wrote build.json) failed: removes what is not
/// finished work (shard files and .tmp files no checkpoint keeps), keeps the finished shards,
/// their checkpoints and the tokenizer for --resume (a full disk or an NFS error must not
/// cost the shards already made). When there is nothing worth keeping (no
/// finished shard, and a tokenizer that was given, not trained), removes `staging` whole.
/// Returns the sentence to add to the failure's message: "; 3 finished shard(s) kept in
/// STAGING: run the same command with --resume to go on" (or "" when removed).
std::string KeepFinishedWork(const std::filesystem::path& staging, bool tokenizer_trained);

/// Writes the checkpoints of one build: each Save covers what the sink did since the last.
class CheckpointWriter {
 public:
  /// `report` and `progress`: the state the sink starts from (nothing new since).
  CheckpointWriter(std::filesystem::path staging, const BuildReport& report,
                   const SinkProgress& progress);

  /// Writes checkpoint-NNNNNN.json for `progress.shards.size()` closed shards. Errors: IOError.
  [[nodiscard]] Status Save(const BuildReport& report, const SinkProgress& progress);

 private:
  std::filesystem::path folder_;
  size_t dropped_ = 0, dropped_captions_ = 0, shards_ = 0, kept_ = 0;
  SetStats::Mark stats_;
};

/// Removes the checkpoints in `staging` and every shard file (a build in parts that finishes
/// without --resume starts its shards over). Errors: IOError.
[[nodiscard]] Status ClearCheckpoints(const std::filesystem::path& staging);

/// Removes `staging`/.resume and the parts' files (.parts, build_parts.h) before the set is
/// published. Errors: IOError.
[[nodiscard]] Status RemoveResumeLog(const std::filesystem::path& staging);

}  // namespace mm::pack
