// build_pipeline.h: the parallel middle of `mmpack build` (commands/build.cc), a TBB
// parallel_pipeline with at most 4 samples per thread in flight:
//   source     serial in order : the next sample (tar members read here, sequentially)
//   processor  parallel        : read the file, decode + fit (image/image_pipeline.h),
//                                tokenize (text/tokenizer.h), compress the chunk
//   sink       serial in order : ShardWriter::Add, or a report entry for a dropped sample
// The sink sees samples in input order whatever --threads is, so the shards are the same at
// any thread count.
#pragma once

#include <vector>

#include "commands/build_report.h"
#include "commands/commands.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "shard/shard_writer.h"
#include "text/tokenizer.h"

namespace mm::pack {

/// Runs every sample of `samples` through the pipeline on `o.threads` threads (0: all cores),
/// adding the good ones to `writer` and the dropped ones (missing_file, file_too_large,
/// unreadable, and ProcessImage's reasons) to `report`, with its counts; progress on stderr
/// unless o.quiet. `from_tar`: the samples are members of tars, read in the source stage.
/// A sample's captions are freed once it is written. `tokenizer` null (--tokenizer none):
/// captions are stored without token ids.
/// Errors: the first failure that stops the build (the writer's, the tokenizer's internals,
/// compression); the pipeline then stops taking samples.
[[nodiscard]] Status RunPipeline(std::vector<RawSample>* samples, bool from_tar,
                                 const BuildOptions& o, const ImageOptions& image_options,
                                 const Tokenizer* tokenizer, ShardWriter* writer,
                                 BuildReport* report);

}  // namespace mm::pack
