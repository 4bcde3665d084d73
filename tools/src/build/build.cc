// build.cc: Build's one-process drivers and what every mode does before them (build.h).
#include "build/build.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "build/select.h"
#include "image/image_pipeline.h"
#include "mm/internal/checksum.h"
#include "set/set_publish.h"

namespace mm::pack {

namespace fs = std::filesystem;

Build::Build(BuildPlan plan, SampleSource* source) : source_(source), plan_(std::move(plan)) {}

Status Build::Run(const BuildOptions& given, SampleSource* source) {
  MM_ASSIGN_OR_RETURN(BuildPlan plan, MakePlan(given));
  if ((source != nullptr) != (plan.options.input_format == InputFormat::kFeed)) {
    return Status::InvalidArgument(source != nullptr
                                       ? "a build given its samples reads --input-format feed"
                                       : "--input-format feed: no feed to read the samples from");
  }
  Build build(std::move(plan), source);
  MM_RETURN_NOT_OK(build.Open());
  MM_RETURN_NOT_OK(build.Select());
  switch (build.plan_.mode) {
    case BuildMode::kPart:
      return build.DrivePart();
    case BuildMode::kAppend:
    case BuildMode::kOneProcess:
      return build.DriveOneProcess();
  }
  return Status::Internal("build mode not handled");
}

Status Build::Open() {
  const bool part = plan_.mode == BuildMode::kPart;
  // Held until the build ends (set_lock.h); the parts of a build in parts share it.
  MM_ASSIGN_OR_RETURN(lock_, LockOutput(plan_.out, /*shared=*/part));
  if (!part) MM_RETURN_NOT_OK(RecoverInterruptedPublish(plan_.out, std::cerr));
  MM_RETURN_NOT_OK(CheckPaths(plan_));
  // A part claims itself before its ingest (part_claim.h): the same part started twice is
  // refused here, and parts waiting for part 0 can tell whether it still runs.
  if (part) {
    MM_ASSIGN_OR_RETURN(claim_, PartClaim::Take(plan_.staging, plan_.part));
  }
  if (plan_.mode == BuildMode::kAppend) MM_RETURN_NOT_OK(OpenAppendBase());
  MM_RETURN_NOT_OK(InitVips());
  // The staging folder beside OUT proves OUT writable before any long work; a failure
  // anywhere below removes it, so OUT is never left half-built. A build killed instead leaves
  // it, with the checkpoints that --resume continues from (resume.h). A build in parts never
  // removes it: the other parts write in it too (made once the input is known to split).
  if (!part) MM_RETURN_NOT_OK(OpenStaging());
  // An --append is run again, a fed build written again (the Writer stops it by ending its
  // stream): neither says "--resume" when interrupted.
  if (plan_.mode != BuildMode::kAppend && source_ == nullptr) interrupt_.emplace(plan_.staging);
  return Status::OK();
}

// --append: the existing set, and the options and tokenizer it fixes (append.h).
Status Build::OpenAppendBase() {
  MM_ASSIGN_OR_RETURN(AppendBase b, mm::pack::OpenAppendBase(plan_.out));
  MM_ASSIGN_OR_RETURN(plan_.options, AppendOptions(plan_.options, plan_.out, b));
  std::string sha;  // of the tokenizer this build would use ("" for none), before any work
  if (o().tokenizer != kNoTokenizer) {
    MM_ASSIGN_OR_RETURN(sha, Sha256HexOfFile(o().tokenizer));
  }
  MM_RETURN_NOT_OK(CheckAppendable(o(), plan_.image, sha, b));
  if (o().filters.dedup != DedupMode::kOff) MM_RETURN_NOT_OK(HashBaseImages(o().threads, &b));
  base_ = std::move(b);
  return Status::OK();
}

// The staging folder this build writes in: a new one (armed: a failure removes it), or with
// --resume the one an interrupted build of the same command left (`resume_`).
Status Build::OpenStaging() {
  const BuildOptions& o = plan_.options;
  const fs::path& staging = plan_.staging;
  auto header = ReadResumeHeader(staging);
  if (o.resume) {
    if (header.ok()) {
      resume_ = *header;
      return Status::OK();
    }
    if (!header.status().IsNotFound()) return header.status().WithContext("--resume");
    if (!o.quiet) {
      std::fprintf(stderr,
                   "mmpack build: note: --resume: no interrupted build in %s; building "
                   "from the start\n",
                   staging.c_str());
    }
  } else if (header.ok() && !o.quiet) {
    std::fprintf(stderr,
                 "mmpack build: note: replacing %s, left by an interrupted build (%lld finished "
                 "shards); --resume continues such a build instead\n",
                 staging.c_str(), static_cast<long long>(CountCheckpoints(staging)));
  }
  MM_RETURN_NOT_OK(MakeStaging(plan_.out).status());
  guard_.Arm(staging);
  return Status::OK();
}

// The samples (select.h) and their fingerprint (resume.h). The samples live in unnamed files
// beside OUT (its file system holds the set anyway), so the build's memory does not grow with
// the input's length (ingest/sample_list.h).
Status Build::Select() {
  if (plan_.mode == BuildMode::kPart) {  // OUT's parent, as the staging folder would make it
    std::error_code ec;
    fs::create_directories(plan_.out.parent_path(), ec);
  }
  MM_ASSIGN_OR_RETURN(IngestResult ingest,
                      IngestInput(o(), plan_.out.parent_path(), source_, &report_));
  format_ = ingest.format;
  MM_ASSIGN_OR_RETURN(samples_, FilterSamples(o(), base_, *ingest.list, &report_));
  ingest.list.reset();
  if (samples_->empty()) {
    return Status::InvalidArgument(
        "no usable sample in '" + o().input + "' (format " + std::string(ToString(format_)) + ")" +
        (report_.dropped.empty() ? std::string() : "; dropped " + report_.ReasonsText()));
  }
  std::string given_tokenizer_sha;
  if (!o().tokenizer.empty() && o().tokenizer != kNoTokenizer) {
    MM_ASSIGN_OR_RETURN(given_tokenizer_sha, Sha256HexOfFile(o().tokenizer));
  }
  MM_ASSIGN_OR_RETURN(fingerprint_, BuildFingerprint(o(), given_tokenizer_sha, *samples_));
  return Status::OK();
}

// A fresh or resumed build (a fresh one is a resume from zero checkpoints), and --append, which
// is run again rather than resumed. Before the tokenizer is made a failure removes the staging
// folder (the guard). After it, a failure (a full disk, EIO, an NFS error) keeps the finished
// shards, their checkpoints and a trained tokenizer for --resume, and removes the rest
// (KeepFinishedWork); an --append leaves nothing.
Status Build::DriveOneProcess() {
  if (resume_) {
    if (resume_->fingerprint != fingerprint_) {
      return Status::InvalidArgument(
          "--resume: " + plan_.staging.string() +
          " holds a build with other options or input (a different manifest, filter or image "
          "option); run the command that started it, or drop --resume to start over");
    }
    MM_ASSIGN_OR_RETURN(tok_, ResumeTokenizer(o(), *resume_, *samples_, plan_.staging));
    std::vector<std::string> notes;
    auto loaded = LoadCheckpoints(plan_.staging, *samples_, &report_, &notes);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    loaded.status().message() + KeepFinishedWork(plan_.staging, tok_.trained));
    }
    progress_ = std::move(*loaded);
    if (!o().quiet) {
      for (const std::string& note : notes) {
        std::fprintf(stderr, "mmpack build: --resume: %s\n", note.c_str());
      }
      std::fprintf(stderr,
                   "mmpack build: --resume: %zu finished shard(s) kept (%lld samples); going "
                   "on from sample %zu of %zu\n",
                   progress_.shards.size(), static_cast<long long>(report_.written),
                   progress_.next_sample, samples_->size());
    }
  } else {
    MM_ASSIGN_OR_RETURN(tok_, MakeTokenizer(o(), *samples_, plan_.staging));
    if (!base_) {
      MM_RETURN_NOT_OK(StartResumeLog(plan_.staging, {fingerprint_, tok_.sha256, tok_.trained}));
      // A fed build cannot be resumed (its samples came once): a failure removes its staging.
      if (source_ == nullptr) guard_.Disarm();
    }
  }
  const size_t first = progress_.next_sample;
  Status written = WriteShards([&](SampleSink* sink) {
    const PipelineInput input{
        *samples_, first,       samples_->size(),    format_ == InputFormat::kWds,
        o(),       plan_.image, tok_.tokenizer.get()};
    return ProcessSamples(input, [sink](ProcessedSample&& s) { return sink->Add(std::move(s)); });
  });
  if (!written.ok()) {
    if (base_ || source_) return written;  // the guard removes the staging folder
    return Status(written.code(),
                  written.message() + KeepFinishedWork(plan_.staging, tok_.trained));
  }
  guard_.Disarm();
  interrupt_.reset();  // published: there is nothing left to resume
  Summarise();
  return Status::OK();
}

// The set's shards from where `progress_` stands (the start, or the last checkpoint) on: `feed`
// hands the samples to a SampleSink, which writes them (with a checkpoint after each shard, but
// for --append); then the set is finished and published (Finish).
Status Build::WriteShards(const std::function<Status(SampleSink*)>& feed) {
  shards_ = progress_.shards;  // kept by --resume
  const int64_t first_shard = base_ ? static_cast<int64_t>(base_->index.info.shards.size())
                                    : static_cast<int64_t>(shards_.size());
  MM_ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer, MakeWriter(first_shard));
  // --append publishes OUT's shards with the new ones (AssembleAppend): no checkpoints.
  std::optional<CheckpointWriter> checkpoints;
  if (!base_) checkpoints.emplace(plan_.staging, report_, progress_);
  SinkTargets targets{writer.get(),
                      &report_,
                      &progress_,
                      checkpoints ? &*checkpoints : nullptr,
                      static_cast<int64_t>(samples_->size() - progress_.next_sample),
                      base_ ? &base_->images : nullptr};
  SampleSink sink(o(), targets);
  Status fed = feed(&sink);
  sink.Finish();
  MM_RETURN_NOT_OK(fed);
  MM_ASSIGN_OR_RETURN(std::vector<mm::reader::ShardEntry> written, writer->Finish());
  shards_.insert(shards_.end(), written.begin(), written.end());
  return Finish();
}

}  // namespace mm::pack

namespace mm::pack {

Status RunBuild(const BuildOptions& options, SampleSource* source) {
  return Build::Run(options, source);
}

}  // namespace mm::pack
