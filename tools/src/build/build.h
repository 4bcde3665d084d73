// build.h: `mmpack build RAW -o OUT` in every mode, as one object that owns the build's state
// (LevelDB's DBImpl is the model: one object holds the state, and opening always recovers, so a
// fresh build is a resume from zero checkpoints). Its stages, in order:
//
//   MakePlan        options checked, OUT and its staging folder, the mode (plan.h)
//   Open            OUT locked (set/set_lock.h), an interrupted publish recovered, the paths
//                   checked, a part claimed (part_claim.h), an --append's OUT read (append.h),
//                   the staging folder opened: new, or the one --resume continues (resume.h)
//   Select          the input's samples, less the drops (select.h)
//   Fingerprint     what the samples and options are, so --resume and the parts agree
//   drive           one driver per mode:
//     DriveOneProcess  the tokenizer (set_tokenizer.h), then the shards from the last
//                      checkpoint (none: the start) on, through the pipeline (pipeline.h)
//     DriveAppend      the same without checkpoints, numbered after OUT's shards
//     DrivePart        a share of the samples into a spool (parts.h); the last part to
//                      finish merges the spools into the shards (drive_part.cc)
//   Finish          report.json, index.json last, the set published (finish.cc)
#pragma once

#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "build/append.h"
#include "build/interrupt_note.h"
#include "build/part_claim.h"
#include "build/pipeline.h"
#include "build/plan.h"
#include "build/progress.h"
#include "build/report.h"
#include "build/resume.h"
#include "build/sample_source.h"
#include "build/set_tokenizer.h"
#include "ingest/sample_list.h"
#include "mm/reader.h"
#include "mm/status.h"
#include "set/output_dir.h"
#include "set/set_lock.h"
#include "shard/shard_writer.h"

namespace mm::pack {

class Build {
 public:
  /// The whole build (commands.h's RunBuild). `source` (may be null: RAW's files are read):
  /// the samples of a build fed by a program (--input-format feed: feed_source.h), which must
  /// outlive the call; such a build runs as one process, --part and --resume refused (the
  /// samples are given once). Errors: one line each, as each stage says.
  [[nodiscard]] static Status Run(const BuildOptions& given, SampleSource* source = nullptr);

 private:
  Build(BuildPlan plan, SampleSource* source);

  // build.cc
  [[nodiscard]] Status Open();
  [[nodiscard]] Status OpenAppendBase();
  [[nodiscard]] Status OpenStaging();
  [[nodiscard]] Status Select();
  [[nodiscard]] Status DriveOneProcess();
  [[nodiscard]] Status WriteShards(const std::function<Status(SampleSink*)>& feed);
  // drive_part.cc
  [[nodiscard]] Status DrivePart();
  [[nodiscard]] Status ShareIntoSpool(SampleRange range);
  [[nodiscard]] Result<SetTokenizer> PartTokenizer();
  [[nodiscard]] Status MergeParts();
  // finish.cc
  [[nodiscard]] Result<std::unique_ptr<ShardWriter>> MakeWriter(int64_t first_shard) const;
  [[nodiscard]] Status WriteIndex() const;
  [[nodiscard]] Status Finish();
  void Summarise() const;

  const BuildOptions& o() const { return plan_.options; }

  SampleSource* const source_;  // null: RAW is read (Select)

  // Declared in the order they are made, so that they go in the reverse order: the staging
  // guard removes a failed build's folder while the lock is still held.
  Progress timer_{0, true};
  BuildPlan plan_;
  SetLock lock_;
  PartClaim claim_;
  std::optional<AppendBase> base_;               // --append: OUT as it is
  std::optional<ResumeHeader> resume_;           // --resume: the build it continues
  StagingGuard guard_{std::filesystem::path()};  // armed while a failure must remove staging
  std::optional<InterruptNote> interrupt_;       // until the set is published
  BuildReport report_;
  InputFormat format_ = InputFormat::kAuto;
  std::unique_ptr<SampleList> samples_;
  std::string fingerprint_;
  SetTokenizer tok_;
  SinkProgress progress_;                       // where the pipeline starts (a checkpoint)
  std::vector<mm::reader::ShardEntry> shards_;  // every shard of the set
  std::time_t start_ = 0;                       // a part's start (parts.h's liveness rules)
};

}  // namespace mm::pack
