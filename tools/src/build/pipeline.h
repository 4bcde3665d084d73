// pipeline.h: the parallel middle of `mmpack build` (commands/build.cc), a TBB
// parallel_pipeline with at most 4 samples per thread in flight (and 16 a thread read ahead):
//   source     serial in order : the next sample (tar members read here, sequentially),
//                                other samples read up to 16 a thread ahead: the GETs of
//                                images at URLs start here, on the fetch threads
//                                (ingest/remote_fetcher.h)
//   processor  parallel        : read the file (or wait for its GET), decode + fit
//                                (image/image_pipeline.h), tokenize (text/tokenizer.h),
//                                compress the chunk
//   consumer   serial in order : a SampleSink (ShardWriter::Add, or a report entry for a
//                                dropped sample), or a part's spool (build_parts.h)
// The sink sees samples in input order whatever --threads is, and whether they come straight
// from the processor or from the spools of several processes, so the shards are the same at
// any thread count and any number of parts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "build/options.h"
#include "build/report.h"
#include "build/resume.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "ingest/sample_list.h"
#include "shard/shard_writer.h"
#include "text/tokenizer.h"

namespace mm::pack {

/// One sample after the processor stage: ready to write, or a drop.
struct ProcessedSample {
  size_t index = 0;  // its position in the sample list
  bool ok = false;   // encoded is to be written; else drop says why not
  EncodedSample encoded;
  DropEntry drop;
  int64_t truncated = 0;                         // captions cut to --max-tokens
  std::vector<int> unk;                          // per kept caption: its <unk> ids
  std::vector<DroppedCaption> dropped_captions;  // by --min-tokens / --drop-long-captions
  uint64_t pixel_hash = 0, perceptual_hash = 0;  // --dedup
  uint64_t source_stamp = 0;                     // SourceStamp of its file (build_resume.h)
};

/// What ProcessSamples reads: samples [begin, end) of `samples` and how each is made.
struct PipelineInput {
  const SampleList& samples;
  size_t begin, end;
  bool from_tar;  // the samples are members of tars, read in the source stage
  const BuildOptions& options;
  const ImageOptions& image;
  const Tokenizer* tokenizer;  // null (--tokenizer none): captions stored without token ids
};

/// Runs `in`'s samples (read from the list's file in the source stage) through the source and
/// processor stages on `in.options.threads` threads (0: all cores) and hands each, in input
/// order, to `consume` (called on one thread at a time). A sample is freed once consumed.
/// Errors: the first failure that stops the build (the tokenizer's internals, compression, or
/// what `consume` returns); the pipeline then stops taking samples.
[[nodiscard]] Status ProcessSamples(const PipelineInput& in,
                                    const std::function<Status(ProcessedSample&&)>& consume);

/// Where a SampleSink puts what it takes.
struct SinkTargets {
  ShardWriter* writer;
  BuildReport* report;
  SinkProgress* progress;
  CheckpointWriter* checkpoints;                  // may be null (--append: no checkpoints)
  int64_t total;                                  // samples the progress line counts to
  const std::vector<KeptSample>* base = nullptr;  // --append --dedup: OUT's images
};

/// The serial end of a build: takes processed samples in input order, drops --dedup's
/// duplicates, adds the others to the writer and the drops to the report (with its counts and
/// stats), and saves a checkpoint (if any) after each shard the writer
/// closes: before a sample that does not fit in the open shard, after one that fills it. Each
/// checkpoint carries the ChainSource of the samples it covers (SinkProgress::sources).
/// `progress`: where the sink starts (a resumed build: LoadCheckpoints; else all zero),
/// updated as it goes. Progress on stderr unless o.quiet, over `total` samples. `base`
/// (--append, may be null): the hashes of OUT's images, which --dedup compares against too, so
/// that a copy of an image OUT holds is dropped as a duplicate of that sample "of OUT".
/// Not thread-safe: one thread calls Add.
class SampleSink {
 public:
  SampleSink(const BuildOptions& o, const SinkTargets& targets);
  ~SampleSink();
  SampleSink(const SampleSink&) = delete;
  SampleSink& operator=(const SampleSink&) = delete;

  /// Errors: the writer's and the checkpoints'.
  [[nodiscard]] Status Add(ProcessedSample&& sample);
  /// Ends the progress line.
  void Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mm::pack
