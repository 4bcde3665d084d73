// drive_part.cc: Build's driver of a build in parts (build.h, parts.h): each part processes
// its share of the samples into a spool; the last part to finish merges the spools.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "build/build.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

// The staging folder of a build in parts: made by whichever part comes first, never cleared
// (the other parts may be writing in it).
Result<fs::path> OpenPartStaging(const fs::path& out) {
  const fs::path staging = StagingPath(out);
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) {
    return Status::IOError("cannot create output directory '" + out.string() + "' (" +
                           staging.string() + "): " + ec.message());
  }
  return staging;
}

// The refusal of a staging folder that holds another build.
Status OtherBuild(const fs::path& staging) {
  return Status::InvalidArgument(staging.string() +
                                 " holds a build with other options or input; remove it (rm -r " +
                                 staging.string() + ") to start this one");
}

}  // namespace

// One part of a build in parts (parts.h): its share of the samples processed into its spool
// (ShareIntoSpool), then, if it is the last part to finish, the whole set merged from the
// spools and published (MergeParts).
Status Build::DrivePart() {
  const PartSpec& part = plan_.part;
  const fs::path& staging = plan_.staging;
  if (part.count > static_cast<int64_t>(samples_->size())) {
    return Status::InvalidArgument("--part: " + std::to_string(part.count) + " parts (" +
                                   part.origin + ") of " + std::to_string(samples_->size()) +
                                   " samples; use at most one part a sample");
  }
  MM_RETURN_NOT_OK(OpenPartStaging(plan_.out).status());
  claim_.Started();
  start_ = std::time(nullptr);
  const std::string who =
      "part " + std::to_string(part.index) + " of " + std::to_string(part.count);
  // Another build's folder is refused before anything is written in it.
  if (auto header = ReadResumeHeader(staging); header.ok() && header->fingerprint != fingerprint_) {
    return OtherBuild(staging);
  }
  RecordPartFailure(staging, part, Status::OK());
  Status st = ShareIntoSpool(PartRange(part, samples_->size()));
  if (!st.ok()) {
    RecordPartFailure(staging, part, st);
    return st.WithContext(who);
  }

  return MergeParts();
}

// This part's samples `range` processed into its spool; nothing when --resume finds the
// part done from the same input files.
Status Build::ShareIntoSpool(SampleRange range) {
  const size_t begin = range.begin, end = range.end;
  const BuildOptions& o = plan_.options;
  const PartSpec& part = plan_.part;
  const fs::path& staging = plan_.staging;
  const std::string who =
      "part " + std::to_string(part.index) + " of " + std::to_string(part.count);
  if (auto done =
          o.resume ? FinishedPart(staging, part.index, part.count, fingerprint_) : std::nullopt) {
    MM_ASSIGN_OR_RETURN(uint64_t now, SourcesOf(*samples_, begin, end));
    if (now == done->sources) {
      if (!o.quiet) {
        std::fprintf(stderr, "mmpack build: %s: already done (--resume)\n", who.c_str());
      }
      return Status::OK();
    }
    if (!o.quiet) {
      std::fprintf(stderr,
                   "mmpack build: %s: an input file of its samples changed since it "
                   "was made (size or modification time); making it again\n",
                   who.c_str());
    }
  }
  MM_ASSIGN_OR_RETURN(SetTokenizer tok, PartTokenizer());
  if (!o.quiet) {
    std::fprintf(stderr, "mmpack build: %s (%s): samples %zu..%zu of %zu\n", who.c_str(),
                 part.origin.c_str(), begin, end, samples_->size());
  }
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SpoolWriter> spool,
                      SpoolWriter::Create(staging, part, range, fingerprint_));
  Progress progress(static_cast<int64_t>(end - begin), o.quiet);
  int64_t done = 0, dropped = 0;
  const PipelineInput input{
      *samples_, begin, end, format_ == InputFormat::kWds, o, plan_.image, tok.tokenizer.get()};
  MM_RETURN_NOT_OK(ProcessSamples(input, [&](ProcessedSample&& s) {
    ++done;
    dropped += !s.ok;
    progress.Update(done, dropped);
    return spool->Add(s);
  }));
  progress.Finish();
  return spool->Finish();
}

// Part 0 makes the tokenizer (trained or given) and writes it with .resume/build.json; the
// other parts read a given one themselves, or wait for the trained one. A waiting part gives up
// when part 0 no longer runs without having written build.json (build_part_claim.h): at once
// when that part 0 started in this run (after `start`, less 5 s of clock skew), else once it
// has not started again for kHeartbeatTimeoutSeconds (a job array may start it later). A part
// 0 that has not started at all is waited for.
Result<SetTokenizer> Build::PartTokenizer() {
  const BuildOptions& o = plan_.options;
  const PartSpec& part = plan_.part;
  const fs::path& staging = plan_.staging;
  const std::string& fingerprint = fingerprint_;
  const std::time_t start = start_;
  auto header = ReadResumeHeader(staging);
  if (header.ok()) {
    if (header->fingerprint != fingerprint) return OtherBuild(staging);
    return OpenMadeTokenizer(o, *header, staging);  // made once, before
  }
  if (!header.status().IsNotFound()) return header.status();
  if (part.index == 0) {
    MM_ASSIGN_OR_RETURN(SetTokenizer tok, MakeTokenizer(o, *samples_, staging));
    MM_RETURN_NOT_OK(StartResumeLog(staging, {fingerprint, tok.sha256, tok.trained}));
    return tok;
  }
  if (!o.tokenizer.empty()) {  // given, or none: read here; part 0 copies it into OUT
    return OpenMadeTokenizer(o, {fingerprint, "", false}, staging);
  }
  // Trained: by part 0 only, so every part tokenizes with the same model.
  for (int waited = 0;; ++waited) {
    header = ReadResumeHeader(staging);
    if (header.ok()) break;
    if (!header.status().IsNotFound()) return header.status();
    if (waited % 10 != 0) {  // part 0's state, once a second
      ::usleep(100 * 1000);
      continue;
    }
    const PartHolder zero = PartLiveness(staging, 0, part.count);
    const std::time_t now = std::time(nullptr);
    if (zero.state == PartHolder::State::kGone &&
        (zero.start + 5 >= start || now - start >= kHeartbeatTimeoutSeconds)) {
      if (ReadResumeHeader(staging).ok()) continue;  // it wrote build.json, then ended
      const std::string failed = PartFailure(staging, 0, part.count, start);
      return Status::InvalidArgument(
          "part 0 (" + zero.Describe() + ") stopped before it made the tokenizer (no " +
          staging.string() + "/" + kResumeFolder + "/build.json" +
          (zero.start + 5 >= start
               ? std::string()
               : "; not started again in " + std::to_string(now - start) + " s") +
          ")" + (failed.empty() ? std::string() : ": " + failed) +
          "; run part 0 again, then this part");
    }
    if (waited % 600 == 0 && !o.quiet) {
      const std::string state = zero.state == PartHolder::State::kNotStarted
                                    ? "part 0 has not started"
                                    : "part 0: " + zero.Describe();
      std::fprintf(stderr,
                   "mmpack build: part %lld of %lld: waiting for part 0 to train the tokenizer "
                   "(%s/%s/build.json; %s)\n",
                   static_cast<long long>(part.index), static_cast<long long>(part.count),
                   staging.c_str(), kResumeFolder, state.c_str());
    }
    ::usleep(100 * 1000);
  }
  if (header->fingerprint != fingerprint) return OtherBuild(staging);
  return OpenMadeTokenizer(o, *header, staging);
}

// The last part to finish merges the spools into the set's shards and publishes it; the
// others say which parts are still to finish.
Status Build::MergeParts() {
  const BuildOptions& o = plan_.options;
  const PartSpec& part = plan_.part;
  const fs::path& staging = plan_.staging;
  const fs::path& out = plan_.out;
  const std::time_t start = start_;
  const std::string who =
      "part " + std::to_string(part.index) + " of " + std::to_string(part.count);
  std::vector<SpoolSummary> parts;
  std::string missing;  // the first 8 parts not finished, then how many more
  int64_t not_done = 0;
  for (int64_t i = 0; i < part.count; ++i) {
    auto done = FinishedPart(staging, i, part.count, fingerprint_);
    if (done) {
      parts.push_back(*done);
    } else if (++not_done <= 8) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    }
  }
  if (not_done > 8) missing += " and " + std::to_string(not_done - 8) + " more";
  if (not_done > 0) {
    const std::string failed = FailedPart(staging, part.count, start);
    if (!failed.empty()) {
      return Status::InvalidArgument("the set is not finished: " + failed +
                                     "; run that part again with --resume");
    }
    if (!o.quiet) {
      std::fprintf(stderr,
                   "mmpack build: %s done; parts %s still to finish (the last one "
                   "writes %s)\n",
                   who.c_str(), missing.c_str(), out.c_str());
    }
    return Status::OK();
  }
  auto finish_lock = TryLockFinish(staging);
  if (!finish_lock.ok() && finish_lock.status().IsNotFound()) return Status::OK();  // published
  MM_RETURN_NOT_OK(finish_lock.status());
  if (!finish_lock->valid()) {
    if (!o.quiet) {
      std::fprintf(stderr, "mmpack build: %s done; another part is writing %s\n", who.c_str(),
                   out.c_str());
    }
    return Status::OK();
  }
  if (!fs::exists(PartsFolder(staging))) return Status::OK();  // finished by another part

  if (!o.quiet) {
    std::fprintf(stderr,
                 "mmpack build: %s: the last part to finish; writing %s from the %lld "
                 "parts\n",
                 who.c_str(), out.c_str(), static_cast<long long>(part.count));
  }
  MM_ASSIGN_OR_RETURN(ResumeHeader header, ReadResumeHeader(staging));
  MM_ASSIGN_OR_RETURN(tok_, OpenMadeTokenizer(o, header, staging));
  if (o.resume) {
    std::vector<std::string> notes;
    MM_ASSIGN_OR_RETURN(progress_, LoadCheckpoints(staging, *samples_, &report_, &notes));
    for (const std::string& note : notes) {
      if (!o.quiet) std::fprintf(stderr, "mmpack build: --resume: %s\n", note.c_str());
    }
  } else {
    MM_RETURN_NOT_OK(ClearCheckpoints(staging));
  }
  const size_t first = progress_.next_sample;  // samples before it are in shards kept by --resume
  SpoolReader reader(staging, part.count, std::move(parts));
  MM_RETURN_NOT_OK(WriteShards([&](SampleSink* sink) -> Status {
    for (ProcessedSample sample;;) {
      MM_ASSIGN_OR_RETURN(bool more, reader.Next(&sample));
      if (!more) return Status::OK();
      if (sample.index >= first) MM_RETURN_NOT_OK(sink->Add(std::move(sample)));
    }
  }));
  Summarise();
  return Status::OK();
}

}  // namespace mm::pack
