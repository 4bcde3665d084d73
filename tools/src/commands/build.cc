// build.cc: `mmpack build RAW -o OUT` end to end (commands.h), as named stages in order:
//
//   ValidateOptions   option values main.cc does not check, into ImageOptions
//   CheckPaths        RAW and OUT: each refusal is one line, before anything is written
//   MakeStaging       OUT.mmpack-partial beside OUT (output_dir.h), removed on any failure;
//                     with --resume, the one an interrupted build left (build_resume.h)
//   IngestInput       the input's samples (ingest/ingest.h); its issues become report entries
//   CheckCaptions     a sample keeps its good captions (text/caption.h); with none, dropped
//   MakeTokenizer     the given model, or one trained on the good captions (text/tokenizer.h)
//   StartResumeLog    the build's fingerprint, so that --resume can continue it
//   WriteShards       read, decode + fit, tokenize, compress (ProcessSamples); write in order
//                     (SampleSink, build_pipeline.h), a checkpoint after each shard
//                     (build_resume.h); or, for a build in parts, the parts' spools merged
//   report.json       what was dropped and why (build_report.h)
//   WriteIndex        index.json, last (mm/internal/index_json.h)
//   Publish           the finished set renamed to OUT (output_dir.h)
//   PrintSummary      one line on stderr (build_report.h)
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands/build_append.h"
#include "commands/build_part_claim.h"
#include "commands/build_parts.h"
#include "commands/build_pipeline.h"
#include "commands/build_report.h"
#include "commands/build_resume.h"
#include "commands/commands.h"
#include "commands/output_dir.h"
#include "commands/progress.h"
#include "commands/set_lock.h"
#include "commands/set_publish.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "ingest/sample_list.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/index_json.h"
#include "mm/internal/set_rules.h"
#include "mm/internal/utf8.h"
#include "shard/shard_writer.h"
#include "text/caption.h"
#include "text/normalize.h"
#include "text/tokenizer.h"
#include "text/tokenizer_sample.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// Option values main.cc does not check, and the image stage's options.
Result<ImageOptions> ValidateOptions(const BuildOptions& o) {
  ImageOptions image_options;
  image_options.mode = o.resize_mode;
  MM_ASSIGN_OR_RETURN(image_options.background, ParseColour(o.background));
  // The reader refuses a set whose sides exceed kMaxImageSide (mm/internal/set_rules.h).
  constexpr int kMax = mm::reader::kMaxImageSide;
  if (o.tokenizer == kNoTokenizer && (o.filters.min_tokens > 0 || o.filters.drop_long_captions)) {
    return Status::InvalidArgument(
        "--min-tokens and --drop-long-captions count token ids; --tokenizer none stores none");
  }
  const bool jpeg = o.image_codec == mm::format::ImageCodec::kJpeg;
  if (!mm::format::IsFixedSize(o.resize_mode)) {
    if (!jpeg) {
      return Status::InvalidArgument("--resize-mode " + std::string(ToString(o.resize_mode)) +
                                     " keeps each image's own size, which needs --codec jpeg "
                                     "(--codec raw stores one [N, H, W, 3] array)");
    }
    if (o.max_size < 1 || o.max_size > kMax) {
      return Status::InvalidArgument("--resize-mode " + std::string(ToString(o.resize_mode)) +
                                     " needs --max-size N, 1.." + std::to_string(kMax) + " pixels");
    }
  } else if (o.max_size != 0) {
    return Status::InvalidArgument("--max-size bounds the keep-ratio modes; with --resize-mode " +
                                   std::string(ToString(o.resize_mode)) + " use --image-size");
  }
  if (jpeg && (o.jpeg_quality < 1 || o.jpeg_quality > 100)) {
    return Status::InvalidArgument("--quality must be 1..100");
  }
  if (o.image_width <= 0 || o.image_height <= 0 || o.image_width > kMax || o.image_height > kMax) {
    return Status::InvalidArgument("--image-size must be 1.." + std::to_string(kMax) +
                                   " pixels a side");
  }
  if (o.max_tokens < 1) return Status::InvalidArgument("--max-tokens must be >= 1");
  // An aspect is longer/shorter side, at least 1: NaN compares false with every aspect and
  // would keep everything, a value below 1 would drop every image.
  const double aspect = o.filters.max_aspect;
  if (!std::isfinite(aspect) || (aspect != 0 && aspect < 1)) {
    return Status::InvalidArgument("--max-aspect is " + std::to_string(aspect) +
                                   "; it takes a finite ratio >= 1 (longer/shorter side), or 0: "
                                   "no limit");
  }
  if (o.append && o.resume) {
    return Status::InvalidArgument(
        "--resume continues an interrupted build, not an --append; run the --append again");
  }
  if (o.append && o.overwrite) {
    return Status::InvalidArgument("--append adds to OUT and --overwrite replaces it; choose one");
  }
  image_options.width = o.image_width;
  image_options.height = o.image_height;
  image_options.max_size = o.max_size;
  image_options.max_pixels = o.max_pixels;
  return image_options;
}

// The input's samples; its notes go to stderr (unless quiet), its issues into `report`.
Result<IngestResult> IngestInput(const BuildOptions& o, const fs::path& spill_dir,
                                 BuildReport* report) {
  FieldNames fields = o.fields;
  fields.max_caption_bytes = o.max_caption_bytes;  // longer ones are dropped by CheckCaptions
  MM_ASSIGN_OR_RETURN(IngestResult ingest,
                      IngestToList(o.input, o.input_format, fields, spill_dir));
  const bool manifest = ingest.format == InputFormat::kJsonl ||
                        ingest.format == InputFormat::kCsv || ingest.format == InputFormat::kTsv;
  const bool has_fields = manifest || ingest.format == InputFormat::kWds;  // wds: .json members
  if (!manifest && !o.fields.image.empty()) {
    return Status::InvalidArgument("--image-field reads JSONL/CSV/TSV manifests; '" + o.input +
                                   "' is read as " + std::string(ToString(ingest.format)));
  }
  if (!has_fields &&
      (!o.fields.caption.empty() || !o.filters.min_score_field.empty() || !o.keep_fields.empty())) {
    return Status::InvalidArgument(
        "--caption-field, --keep-fields and --min-score read JSONL/CSV/TSV manifests and the "
        ".json members of WebDataset tars; '" +
        o.input + "' is read as " + std::string(ToString(ingest.format)));
  }
  if (!o.quiet) {
    for (const std::string& note : ingest.notes) {
      std::fprintf(stderr, "mmpack build: note: %s\n", note.c_str());
    }
  }
  for (IngestIssue& issue : ingest.issues) {
    report->dropped.push_back({std::move(issue.source), std::move(issue.key),
                               std::move(issue.reason), std::move(issue.detail)});
  }
  return ingest;
}

// Caption checks: a sample keeps its good captions; with none left it is dropped (the reason
// of its first bad caption). True when it stays.
bool CheckCaptions(RawSample* s, int64_t max_caption_bytes, std::vector<DropEntry>* dropped,
                   BuildReport* report) {
  std::vector<std::string> good;
  const char* first_reason = nullptr;
  for (size_t c = 0; c < s->captions.size(); ++c) {
    const char* reason = CheckCaption(s->captions[c], max_caption_bytes);
    if (reason == nullptr) {
      good.push_back(std::move(s->captions[c]));
    } else {
      std::string().swap(s->captions[c]);  // a caption over the limit is freed at once
      if (first_reason == nullptr) first_reason = reason;
      report->dropped_captions.push_back({s->source, s->key, static_cast<int64_t>(c), reason});
    }
  }
  if (good.empty()) {
    dropped->push_back({s->source, s->key, first_reason ? first_reason : "empty_caption",
                        std::to_string(s->captions.size()) + " caption(s), none usable"});
    return false;
  }
  s->captions = std::move(good);
  return true;
}

// Why a kept field's value cannot be stored (nullptr: it can): strings are stored as HDF5
// UTF-8 strings, byte for byte, so they must be valid UTF-8 without NUL, and are bounded like a
// caption (--max-caption-bytes) so that one value cannot cost unbounded memory.
const char* CheckFieldValue(const FieldValue& v, int64_t max_bytes) {
  if (v.type != FieldValue::Type::kString) return nullptr;
  if (static_cast<int64_t>(v.s.size()) > max_bytes) return "field_too_large";
  if (!IsValidUtf8(v.s)) return "invalid_utf8";
  if (v.s.find('\0') != std::string::npos) return "nul_in_field";
  return nullptr;
}

// --keep-fields: a sample with a kept value that cannot be stored is dropped (the reason names
// the field). True when it stays; `present` counts, per kept field, the samples that have it.
bool CheckKeptFields(const BuildOptions& o, const RawSample& s, std::vector<DropEntry>* dropped,
                     std::vector<int64_t>* present) {
  const char* reason = nullptr;
  size_t f = 0;
  for (; f < o.keep_fields.size() && reason == nullptr; ++f) {
    reason = CheckFieldValue(s.fields[f], o.max_caption_bytes);
  }
  if (reason != nullptr) {
    dropped->push_back(
        {s.source, s.key, reason, "kept field '" + o.keep_fields[f - 1] + "' cannot be stored"});
    return false;
  }
  for (f = 0; f < o.keep_fields.size(); ++f) {
    (*present)[f] += s.fields[f].type != FieldValue::Type::kMissing;
  }
  return true;
}

// The samples the build makes, in one pass over the ingested list into a new one: the caption
// checks, --min-score, --keep-fields and, with --append, the keys OUT holds. Their drops reach
// the report in that order of checks (all caption drops, then all score drops...), as one
// pass a check would give them. A kept field that no sample has gets a note, as it is most
// likely misspelt.
Result<std::unique_ptr<SampleList>> FilterSamples(const BuildOptions& o,
                                                  const std::optional<AppendBase>& base,
                                                  const SampleList& in, BuildReport* report) {
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> out, SampleList::Create(in.dir()));
  const auto& extra = o.fields.extra;
  const size_t score_at =
      std::find(extra.begin(), extra.end(), o.filters.min_score_field) - extra.begin();
  std::vector<DropEntry> caption_drops, score_drops, field_drops, base_drops;
  std::vector<int64_t> present(o.keep_fields.size(), 0);
  MM_RETURN_NOT_OK(ForEachSample(in, [&](uint64_t, RawSample& s) -> Status {
    if (!CheckCaptions(&s, o.max_caption_bytes, &caption_drops, report)) return Status::OK();
    IngestIssue issue;
    if (DropsForScore(o.filters, score_at, s, &issue)) {
      score_drops.push_back(
          {std::move(issue.source), std::move(issue.key), std::move(issue.reason),
           std::move(issue.detail)});
      return Status::OK();
    }
    if (!o.keep_fields.empty() && !CheckKeptFields(o, s, &field_drops, &present)) {
      return Status::OK();
    }
    if (base && DropsAsKeyOfBase(*base, s, &base_drops)) return Status::OK();
    return out->Add(s);
  }));
  MM_RETURN_NOT_OK(out->Finish());
  for (auto* drops : {&caption_drops, &score_drops, &field_drops, &base_drops}) {
    for (DropEntry& d : *drops) report->dropped.push_back(std::move(d));
  }
  for (size_t f = 0; f < o.keep_fields.size(); ++f) {
    if (present[f] == 0 && !o.quiet && !out->empty()) {
      std::fprintf(stderr, "mmpack build: note: kept field '%s' has no value in any sample\n",
                   o.keep_fields[f].c_str());
    }
  }
  return out;
}

// The tokenizer of the set, and what index.json says of it.
struct SetTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;  // null with --tokenizer none
  std::string sha256;                    // of the model bytes, as OUT/tokenizer.model holds them
  bool trained = false;                  // trained on the captions here
};

// The tokenizer in `model_bytes` (any kind, text/tokenizer.h): its SHA-256, and it loaded.
Result<SetTokenizer> TokenizerOf(std::string model_bytes, bool trained) {
  SetTokenizer out;
  out.sha256 = Sha256Hex(model_bytes);
  out.trained = trained;
  MM_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::FromSerialized(std::move(model_bytes)));
  return out;
}

// A SentencePiece unigram model trained on at most --tokenizer-sample of the good captions
// (a reservoir sample, text/tokenizer_sample.h), as the tokenizer will see them (--lowercase,
// --normalize): training memory is bounded whatever the input's size.
Result<std::string> TrainTokenizer(const BuildOptions& o, const SampleList& samples) {
  CaptionReservoir reservoir(o.tokenizer_sample);
  MM_RETURN_NOT_OK(ForEachSample(samples, [&](uint64_t, RawSample& s) -> Status {
    for (std::string& c : s.captions) {
      if (o.text.identity()) {
        reservoir.Add(std::move(c));
      } else {
        MM_ASSIGN_OR_RETURN(std::string n, NormalizeForTokenizer(c, o.text));
        reservoir.Add(std::move(n));
      }
    }
    return Status::OK();
  }));
  const int64_t seen = reservoir.seen();
  const std::vector<std::string> text = reservoir.Take();
  const std::vector<std::string_view> captions(text.begin(), text.end());
  if (!o.quiet) {
    std::fprintf(stderr,
                 "mmpack build: training a SentencePiece unigram tokenizer (vocab %d) on %zu "
                 "captions%s\n",
                 o.vocab_size, captions.size(),
                 static_cast<int64_t>(captions.size()) < seen
                     ? (" (a sample of " + std::to_string(seen) + ", --tokenizer-sample)").c_str()
                     : "");
  }
  std::string note;
  MM_ASSIGN_OR_RETURN(std::string model, Tokenizer::Train(captions, o.vocab_size, &note));
  if (!note.empty() && !o.quiet) std::fprintf(stderr, "mmpack build: %s\n", note.c_str());
  return model;
}

Result<SetTokenizer> MakeTokenizer(const BuildOptions& o, const SampleList& samples,
                                   const fs::path& staging) {
  if (o.tokenizer == kNoTokenizer) return SetTokenizer();  // text only: no tokenizer file
  std::string model_bytes;
  bool trained = false;
  if (!o.tokenizer.empty()) {
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
  } else {
    MM_ASSIGN_OR_RETURN(model_bytes, TrainTokenizer(o, samples));
    trained = true;
  }
  auto tok = TokenizerOf(std::move(model_bytes), trained);
  if (!tok.ok()) return tok.status().WithContext(trained ? "trained tokenizer" : "--tokenizer");
  // The set carries the tokenizer's file as given, under its kind's name (mm/format.h).
  MM_RETURN_NOT_OK(WriteText(staging / tok->tokenizer->file_name(), tok->tokenizer->model_bytes()));
  return tok;
}

// The tokenizer of the build `header` describes, written nowhere: the trained model it left in
// `staging` (not trained again: training is not repeatable to the byte), or the given
// --tokenizer, whose bytes the fingerprint already matched (or none).
Result<SetTokenizer> OpenMadeTokenizer(const BuildOptions& o, const ResumeHeader& header,
                                       const fs::path& staging) {
  std::string model_bytes;
  if (!header.tokenizer_trained) {
    if (o.tokenizer == kNoTokenizer) return SetTokenizer();
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
    return TokenizerOf(std::move(model_bytes), false);
  }
  const fs::path model = staging / std::string(mm::format::kTokenizerFile);
  MM_RETURN_NOT_OK(ReadRegularFile(model.string(), &model_bytes).WithContext("--resume"));
  if (Sha256Hex(model_bytes) != header.tokenizer_sha256) {
    return Status::Corruption("--resume: " + model.string() +
                              " is not the tokenizer the interrupted build trained; run without "
                              "--resume to start over");
  }
  return TokenizerOf(std::move(model_bytes), true);
}

// A resumed one-process build's tokenizer: OpenMadeTokenizer's, with a given model copied into
// `staging` again (as MakeTokenizer does).
Result<SetTokenizer> ResumeTokenizer(const BuildOptions& o, const ResumeHeader& header,
                                     const SampleList& samples, const fs::path& staging) {
  if (!header.tokenizer_trained) return MakeTokenizer(o, samples, staging);
  return OpenMadeTokenizer(o, header, staging);
}

// Ctrl-C, or SIGTERM from a scheduler's time limit: a line saying that --resume continues the
// build, then the signal's default action. The staging folder is kept for --resume.
const char* g_interrupt_note = nullptr;
size_t g_interrupt_note_size = 0;

void OnInterrupt(int sig) {
  if (g_interrupt_note != nullptr) {
    ssize_t ignored = ::write(STDERR_FILENO, g_interrupt_note, g_interrupt_note_size);
    (void)ignored;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// While alive: the note on SIGINT and SIGTERM, except where the signal is ignored (a build
// started in the background by a script stays immune to Ctrl-C, as before). The destructor
// puts the dispositions from before back.
class InterruptNote {
 public:
  explicit InterruptNote(const fs::path& staging) {
    static std::string note;
    note = "\nmmpack build: interrupted; the shards finished so far are kept in " +
           staging.string() + ": run the same command with --resume to continue\n";
    g_interrupt_note = note.c_str();
    g_interrupt_note_size = note.size();
    struct sigaction sa {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    for (auto [sig, old] : {std::pair{SIGINT, &old_int_}, std::pair{SIGTERM, &old_term_}}) {
      ::sigaction(sig, nullptr, old);
      if (old->sa_handler != SIG_IGN) ::sigaction(sig, &sa, nullptr);
    }
  }
  ~InterruptNote() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_interrupt_note = nullptr;
  }
  InterruptNote(const InterruptNote&) = delete;
  InterruptNote& operator=(const InterruptNote&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The staging folder this build writes in: a new one, or with --resume the one an interrupted
// build of the same command left. `resume` is set when there is one to continue.
Result<fs::path> OpenStaging(const BuildOptions& o, const fs::path& out,
                             std::optional<ResumeHeader>* resume) {
  const fs::path staging = StagingPath(out);
  auto header = ReadResumeHeader(staging);
  if (o.resume) {
    if (header.ok()) {
      *resume = *header;
      return staging;
    }
    if (!header.status().IsNotFound()) return header.status().WithContext("--resume");
    if (!o.quiet) {
      std::fprintf(stderr, "mmpack build: note: --resume: no interrupted build in %s; building "
                   "from the start\n", staging.c_str());
    }
  } else if (header.ok() && !o.quiet) {
    std::fprintf(stderr,
                 "mmpack build: note: replacing %s, left by an interrupted build (%lld finished "
                 "shards); --resume continues such a build instead\n",
                 staging.c_str(), static_cast<long long>(CountCheckpoints(staging)));
  }
  return MakeStaging(out);
}

Result<std::unique_ptr<ShardWriter>> MakeWriter(const BuildOptions& o, const fs::path& staging,
                                                const std::string& tokenizer_sha256,
                                                int64_t first_shard) {
  WriterOptions wo;
  wo.first_shard_index = first_shard;
  wo.output_dir = staging.string();
  wo.image_width = o.image_width;
  wo.image_height = o.image_height;
  wo.resize_mode = o.resize_mode;
  wo.compression = o.compression;
  wo.compression_level = o.compression_level;
  wo.image_codec = o.image_codec;
  wo.jpeg_quality = o.jpeg_quality;
  wo.max_size = o.max_size;
  wo.shard_size = o.shard_size;
  wo.samples_per_shard = o.samples_per_shard;
  wo.tokenizer_sha256 = tokenizer_sha256;
  wo.metadata_fields = o.keep_fields;
  wo.check_unique_keys = false;  // unique by construction: MakeKeysUnique, and --append's drops
  return ShardWriter::Create(wo);
}

// The curation options in index.json's build_options (those that are on).
void FilterOptionsJson(const BuildOptions& o, nlohmann::ordered_json* out) {
  const FilterOptions& f = o.filters;
  if (!o.fields.image.empty()) (*out)["image_field"] = o.fields.image;
  if (!o.fields.caption.empty()) (*out)["caption_field"] = o.fields.caption;
  if (f.min_size > 0) (*out)["min_size"] = f.min_size;
  if (f.max_aspect > 0) (*out)["max_aspect"] = f.max_aspect;
  if (f.min_tokens > 0) (*out)["min_tokens"] = f.min_tokens;
  if (f.drop_long_captions) (*out)["drop_long_captions"] = true;
  if (!f.min_score_field.empty()) {
    (*out)["min_score"] = {{"field", f.min_score_field}, {"value", f.min_score}};
  }
  (*out)["dedup"] = std::string(ToString(f.dedup));
  if (f.dedup == DedupMode::kNear) (*out)["near_threshold"] = f.near_threshold;
}

// One line on stderr when more than 1% of the token ids are <unk>, naming the likely fix.
void WarnUnknown(const BuildOptions& o, const SetTokenizer& tok, const BuildReport& report) {
  const double rate = report.stats.UnkRate();
  if (rate <= 0.01 || tok.tokenizer == nullptr) return;
  std::string fix;
  if (!o.text.lowercase) {
    fix = "the tokenizer may expect lowercased text (ALBERT's does): try --lowercase";
  } else if (o.text.normalize == TextNormalization::kNone) {
    fix = "try --normalize nfkc, or a tokenizer that covers these captions' characters";
  } else {
    fix = tok.trained ? "raise --vocab-size"
                      : "the tokenizer does not cover these captions' characters; omit "
                        "--tokenizer to train one on them";
  }
  std::fprintf(stderr, "mmpack build: warning: %.1f%% of the token ids are <unk> (id %d); %s\n",
               100 * rate, tok.tokenizer->unk_id(), fix.c_str());
}

// index.json, written last: what the set holds and how it was built.
Status WriteIndex(const BuildOptions& o, InputFormat format, const ImageOptions& image_options,
                  const SetTokenizer& tok, const std::vector<mm::reader::ShardEntry>& shards,
                  const BuildReport& report, const fs::path& staging) {
  mm::reader::internal::IndexDocument index;
  mm::reader::SetInfo& set = index.info;
  set.image_height = o.image_height;
  set.image_width = o.image_width;
  set.resize_mode = ToString(o.resize_mode);
  set.compression = ToString(o.compression);
  set.compression_level = o.compression_level;
  set.image_codec = ToString(o.image_codec);
  if (o.image_codec == mm::format::ImageCodec::kJpeg) set.jpeg_quality = o.jpeg_quality;
  set.max_size = o.max_size;
  set.has_tokenizer = tok.tokenizer != nullptr;
  if (set.has_tokenizer) {
    set.vocab_size = tok.tokenizer->vocab_size();
    set.pad_id = tok.tokenizer->pad_id();
    set.unk_id = tok.tokenizer->unk_id();
    set.bos_id = tok.tokenizer->bos_id();
    set.eos_id = tok.tokenizer->eos_id();
    set.max_tokens = o.max_tokens;
  }
  set.tokenizer_sha256 = tok.sha256;
  set.unk_rate = set.has_tokenizer ? report.stats.UnkRate() : -1;
  set.text_lowercase = o.text.lowercase;
  set.text_normalize = std::string(ToString(o.text.normalize));
  set.metadata_fields = o.keep_fields;
  set.shards = shards;
  index.background = ColourHex(image_options.background);
  index.tokenizer_trained = tok.trained;
  if (tok.tokenizer != nullptr) {
    index.tokenizer_kind = tok.tokenizer->kind();
    index.tokenizer_file = tok.tokenizer->file_name();
  }
  index.build_options = {
      {"input_format", std::string(ToString(format))}, {"max_pixels", o.max_pixels},
      {"max_caption_bytes", o.max_caption_bytes},      {"shard_size", o.shard_size},
      {"samples_per_shard", o.samples_per_shard},      {"vocab_size", o.vocab_size}};
  FilterOptionsJson(o, &index.build_options);
  index.dropped_by_reason = report.ByReason();
  return WriteText(staging / std::string(mm::format::kIndexFile),
                   mm::reader::internal::EncodeIndex(index));
}


// The end of every build: report.json and index.json (or, for --append, OUT's merged with
// the new ones), the checkpoints and parts removed, the set published as OUT.
Status FinishSet(const BuildOptions& o, InputFormat format, const ImageOptions& image_options,
                 const SetTokenizer& tok, const std::optional<AppendBase>& base,
                 const std::vector<mm::reader::ShardEntry>& shards, const BuildReport& report,
                 const fs::path& out, const fs::path& staging) {
  if (report.written == 0) {
    if (base) {
      return Status::InvalidArgument("no sample of '" + o.input + "' could be appended; dropped " +
                                     report.ReasonsText() + " (OUT is unchanged)");
    }
    MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kReportFile),
                               ReportJson(o, format, report)));
    return Status::InvalidArgument("no sample of '" + o.input + "' could be used; dropped " +
                                   report.ReasonsText());
  }
  if (base) {
    MM_RETURN_NOT_OK(AssembleAppend(o, format, *base, shards, report, out, staging));
  } else {
    MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kReportFile),
                               ReportJson(o, format, report)));
    MM_RETURN_NOT_OK(WriteIndex(o, format, image_options, tok, shards, report, staging));
  }
  MM_RETURN_NOT_OK(RemoveResumeLog(staging));
  return PublishListed(staging, out, std::cerr);  // what the build wrote, and nothing else
}

// The set's shards from where `progress` stands (the start, or the last checkpoint) on: `feed`
// hands the samples to a SampleSink, which writes them (with a checkpoint after each shard, but
// for --append); then the set is finished and published (FinishSet). `shards`: every shard of
// the set, for the summary.
Status WriteShards(const BuildOptions& o, InputFormat format, const ImageOptions& image_options,
                   const SetTokenizer& tok, const std::optional<AppendBase>& base,
                   BuildReport* report, SinkProgress* progress, size_t total_samples,
                   const fs::path& out, const fs::path& staging,
                   const std::function<Status(SampleSink*)>& feed,
                   std::vector<mm::reader::ShardEntry>* shards) {
  *shards = progress->shards;  // kept by --resume
  const int64_t first_shard = base ? static_cast<int64_t>(base->index.info.shards.size())
                                   : static_cast<int64_t>(shards->size());
  MM_ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer,
                      MakeWriter(o, staging, tok.sha256, first_shard));
  // --append publishes OUT's shards with the new ones (AssembleAppend): no checkpoints.
  std::optional<CheckpointWriter> checkpoints;
  if (!base) checkpoints.emplace(staging, *report, *progress);
  SampleSink sink(o, writer.get(), report, progress, checkpoints ? &*checkpoints : nullptr,
                  static_cast<int64_t>(total_samples - progress->next_sample),
                  base ? &base->images : nullptr);
  Status fed = feed(&sink);
  sink.Finish();
  MM_RETURN_NOT_OK(fed);
  MM_ASSIGN_OR_RETURN(std::vector<mm::reader::ShardEntry> written, writer->Finish());
  shards->insert(shards->end(), written.begin(), written.end());
  return FinishSet(o, format, image_options, tok, base, *shards, *report, out, staging);
}

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

// Part 0 makes the tokenizer (trained or given) and writes it with .resume/build.json; the
// other parts read a given one themselves, or wait for the trained one. A waiting part gives up
// when part 0 no longer runs without having written build.json (build_part_claim.h): at once
// when that part 0 started in this run (after `start`, less 5 s of clock skew), else once it
// has not started again for kHeartbeatTimeoutSeconds (a job array may start it later). A part
// 0 that has not started at all is waited for.
Result<SetTokenizer> PartTokenizer(const BuildOptions& o, const PartSpec& part,
                                   const SampleList& samples,
                                   const std::string& fingerprint, const fs::path& staging,
                                   std::time_t start) {
  auto header = ReadResumeHeader(staging);
  if (header.ok()) {
    if (header->fingerprint != fingerprint) return OtherBuild(staging);
    return OpenMadeTokenizer(o, *header, staging);  // made once, before
  }
  if (!header.status().IsNotFound()) return header.status();
  if (part.index == 0) {
    MM_ASSIGN_OR_RETURN(SetTokenizer tok, MakeTokenizer(o, samples, staging));
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

// One part of a build in parts (build_parts.h): its share of the samples processed into its
// spool, then, if it is the last part to finish, the whole set merged from the spools and
// published.
Status RunPartBuild(const BuildOptions& o, const PartSpec& part, const ImageOptions& image_options,
                    InputFormat format, const SampleList& samples, BuildReport* report,
                    const std::string& fingerprint, const fs::path& out,
                    const fs::path& staging) {
  Progress timer(0, true);
  const std::time_t start = std::time(nullptr);
  const std::string who = "part " + std::to_string(part.index) + " of " +
                          std::to_string(part.count);
  // Another build's folder is refused before anything is written in it.
  if (auto header = ReadResumeHeader(staging); header.ok() && header->fingerprint != fingerprint) {
    return OtherBuild(staging);
  }
  RecordPartFailure(staging, part, Status::OK());
  size_t begin = 0, end = 0;
  PartRange(part.index, part.count, samples.size(), &begin, &end);
  Status st = [&]() -> Status {
    if (auto done =
            o.resume ? FinishedPart(staging, part.index, part.count, fingerprint) : std::nullopt) {
      MM_ASSIGN_OR_RETURN(uint64_t now, SourcesOf(samples, begin, end));
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
    MM_ASSIGN_OR_RETURN(SetTokenizer tok,
                        PartTokenizer(o, part, samples, fingerprint, staging, start));
    if (!o.quiet) {
      std::fprintf(stderr, "mmpack build: %s (%s): samples %zu..%zu of %zu\n", who.c_str(),
                   part.origin.c_str(), begin, end, samples.size());
    }
    MM_ASSIGN_OR_RETURN(std::unique_ptr<SpoolWriter> spool,
                        SpoolWriter::Create(staging, part, begin, end, fingerprint));
    Progress progress(static_cast<int64_t>(end - begin), o.quiet);
    int64_t done = 0, dropped = 0;
    MM_RETURN_NOT_OK(ProcessSamples(samples, begin, end, format == InputFormat::kWds, o,
                                    image_options, tok.tokenizer.get(),
                                    [&](ProcessedSample&& s) {
                                      ++done;
                                      dropped += !s.ok;
                                      progress.Update(done, dropped);
                                      return spool->Add(s);
                                    }));
    progress.Finish();
    return spool->Finish();
  }();
  if (!st.ok()) {
    RecordPartFailure(staging, part, st);
    return st.WithContext(who);
  }

  // The last part to finish merges the spools.
  std::vector<SpoolSummary> parts;
  std::string missing;  // the first 8 parts not finished, then how many more
  int64_t not_done = 0;
  for (int64_t i = 0; i < part.count; ++i) {
    auto done = FinishedPart(staging, i, part.count, fingerprint);
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
      std::fprintf(stderr, "mmpack build: %s done; parts %s still to finish (the last one "
                   "writes %s)\n", who.c_str(), missing.c_str(), out.c_str());
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
    std::fprintf(stderr, "mmpack build: %s: the last part to finish; writing %s from the %lld "
                 "parts\n", who.c_str(), out.c_str(), static_cast<long long>(part.count));
  }
  MM_ASSIGN_OR_RETURN(ResumeHeader header, ReadResumeHeader(staging));
  MM_ASSIGN_OR_RETURN(SetTokenizer tok, OpenMadeTokenizer(o, header, staging));
  SinkProgress progress;
  if (o.resume) {
    std::vector<std::string> notes;
    MM_ASSIGN_OR_RETURN(progress, LoadCheckpoints(staging, samples, report, &notes));
    for (const std::string& note : notes) {
      if (!o.quiet) std::fprintf(stderr, "mmpack build: --resume: %s\n", note.c_str());
    }
  } else {
    MM_RETURN_NOT_OK(ClearCheckpoints(staging));
  }
  const size_t first = progress.next_sample;  // samples before it are in shards kept by --resume
  SpoolReader reader(staging, part.count, std::move(parts));
  std::vector<mm::reader::ShardEntry> shards;
  MM_RETURN_NOT_OK(WriteShards(
      o, format, image_options, tok, std::nullopt, report, &progress, samples.size(), out,
      staging,
      [&](SampleSink* sink) -> Status {
        for (ProcessedSample sample;;) {
          MM_ASSIGN_OR_RETURN(bool more, reader.Next(&sample));
          if (!more) return Status::OK();
          if (sample.index >= first) MM_RETURN_NOT_OK(sink->Add(std::move(sample)));
        }
      },
      &shards));
  WarnUnknown(o, tok, *report);
  PrintSummary(o, *report, shards, timer.ElapsedSeconds());
  return Status::OK();
}

// A build without --part under a launcher that started several processes (mpirun, srun, or a
// training script they started) builds the whole input in this process: one line says so and
// names --part auto, which splits it over the ranks.
void NoteLauncher(const BuildOptions& o, const PartSpec& part) {
  if (!o.part.empty() || part.count > 0 || o.quiet) return;
  auto launcher = LauncherPart();
  if (!launcher.ok() || launcher->count == 0) return;
  std::fprintf(stderr,
               "mmpack build: note: %s says rank %lld of %lld; this process builds the whole "
               "input (--part auto splits it over the ranks)\n",
               launcher->origin.c_str(), static_cast<long long>(launcher->index),
               static_cast<long long>(launcher->count));
}

}  // namespace

Status RunBuild(const BuildOptions& given) {
  Progress timer(0, true);
  MM_RETURN_NOT_OK(RefuseUrlOutput(given.output, "output"));  // before the lock makes a folder
  MM_ASSIGN_OR_RETURN(ImageOptions image_options, ValidateOptions(given));
  MM_ASSIGN_OR_RETURN(PartSpec part, ResolvePart(given.part));
  NoteLauncher(given, part);
  if (part.count > 0 && given.append) {
    return Status::InvalidArgument("--append runs as one process; drop --part");
  }
  const fs::path out = NormalOutput(given.output);
  // Held until return (set_lock.h); the parts of a build in parts share it.
  MM_ASSIGN_OR_RETURN(SetLock lock, LockOutput(out, /*shared=*/part.count > 0));
  if (part.count == 0) MM_RETURN_NOT_OK(RecoverInterruptedPublish(out, std::cerr));
  MM_RETURN_NOT_OK(CheckPaths(given, out));
  // A part claims itself before its ingest (build_part_claim.h): the same part started twice is
  // refused here, and parts waiting for part 0 can tell whether it still runs.
  PartClaim claim;
  if (part.count > 0) {
    MM_ASSIGN_OR_RETURN(claim, PartClaim::Take(StagingPath(out), part));
  }
  // --append: the existing set, and the tokenizer it fixes (build_append.h).
  std::optional<AppendBase> base;
  BuildOptions o = given;
  if (given.append) {
    MM_ASSIGN_OR_RETURN(AppendBase b, OpenAppendBase(out));
    MM_ASSIGN_OR_RETURN(o, AppendOptions(given, out, b));
    std::string sha;  // of the tokenizer this build would use ("" for none), before any work
    if (o.tokenizer != kNoTokenizer) {
      MM_ASSIGN_OR_RETURN(sha, Sha256HexOfFile(o.tokenizer));
    }
    MM_RETURN_NOT_OK(CheckAppendable(o, image_options, sha, b));
    if (o.filters.dedup != DedupMode::kOff) MM_RETURN_NOT_OK(HashBaseImages(o.threads, &b));
    base = std::move(b);
  }
  MM_RETURN_NOT_OK(InitVips());
  // The staging folder beside OUT proves OUT writable before any long work; a failure
  // anywhere below removes it, so OUT is never left half-built. A build killed instead leaves
  // it, with the checkpoints that --resume continues from (build_resume.h). A build in parts
  // never removes it: the other parts write in it too.
  std::optional<ResumeHeader> resume;
  fs::path staging;
  if (part.count > 0) {
    staging = StagingPath(out);  // made once the input is known to split (OpenPartStaging)
  } else {
    MM_ASSIGN_OR_RETURN(staging, OpenStaging(o, out, &resume));
  }
  StagingGuard guard(resume || part.count > 0 ? fs::path() : staging);  // armed once safe
  std::optional<InterruptNote> interrupt_note;  // until the set is published
  if (!base) interrupt_note.emplace(staging);   // an --append is run again, not resumed

  BuildReport report;
  // The samples live in unnamed files beside OUT (its file system holds the set anyway), so the
  // build's memory does not grow with the input's length (ingest/sample_list.h). A part's
  // staging folder comes later: OUT's parent is made here, as the staging folder would make it.
  if (part.count > 0) {
    std::error_code ec;
    fs::create_directories(out.parent_path(), ec);
  }
  MM_ASSIGN_OR_RETURN(IngestResult ingest, IngestInput(o, out.parent_path(), &report));
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> list,
                      FilterSamples(o, base, *ingest.list, &report));
  ingest.list.reset();
  const SampleList& samples = *list;
  if (samples.empty()) {
    return Status::InvalidArgument(
        "no usable sample in '" + o.input + "' (format " + std::string(ToString(ingest.format)) +
        ")" + (report.dropped.empty() ? std::string() : "; dropped " + report.ReasonsText()));
  }
  std::string given_tokenizer_sha;
  if (!o.tokenizer.empty() && o.tokenizer != kNoTokenizer) {
    MM_ASSIGN_OR_RETURN(given_tokenizer_sha, Sha256HexOfFile(o.tokenizer));
  }
  MM_ASSIGN_OR_RETURN(const std::string fingerprint,
                      BuildFingerprint(o, given_tokenizer_sha, samples));
  if (part.count > static_cast<int64_t>(samples.size())) {
    return Status::InvalidArgument("--part: " + std::to_string(part.count) + " parts (" +
                                   part.origin + ") of " + std::to_string(samples.size()) +
                                   " samples; use at most one part a sample");
  }
  if (part.count > 0) {
    MM_RETURN_NOT_OK(OpenPartStaging(out).status());
    claim.Started();
    return RunPartBuild(o, part, image_options, ingest.format, samples, &report, fingerprint,
                        out, staging);
  }
  // Before the tokenizer is made a failure removes the staging folder (the guard). After it, a
  // failure (a full disk, EIO, an NFS error) keeps the finished shards, their checkpoints and a
  // trained tokenizer for --resume, and removes the rest (KeepFinishedWork, issue 23 item 7);
  // an --append, which is run again rather than resumed, leaves nothing.
  SinkProgress progress;  // where the pipeline starts: the beginning, or the last checkpoint
  SetTokenizer tok;
  if (resume) {
    if (resume->fingerprint != fingerprint) {
      return Status::InvalidArgument(
          "--resume: " + staging.string() +
          " holds a build with other options or input (a different manifest, filter or image "
          "option); run the command that started it, or drop --resume to start over");
    }
    MM_ASSIGN_OR_RETURN(tok, ResumeTokenizer(o, *resume, samples, staging));
  } else {
    MM_ASSIGN_OR_RETURN(tok, MakeTokenizer(o, samples, staging));
    if (!base) {
      MM_RETURN_NOT_OK(StartResumeLog(staging, {fingerprint, tok.sha256, tok.trained}));
      guard.Disarm();
    }
  }
  std::vector<mm::reader::ShardEntry> shards;
  Status written = [&]() -> Status {
    if (resume) {
      std::vector<std::string> notes;
      MM_ASSIGN_OR_RETURN(progress, LoadCheckpoints(staging, samples, &report, &notes));
      if (!o.quiet) {
        for (const std::string& note : notes) {
          std::fprintf(stderr, "mmpack build: --resume: %s\n", note.c_str());
        }
        std::fprintf(stderr,
                     "mmpack build: --resume: %zu finished shard(s) kept (%lld samples); going "
                     "on from sample %zu of %zu\n",
                     progress.shards.size(), static_cast<long long>(report.written),
                     progress.next_sample, samples.size());
      }
    }
    const size_t first = progress.next_sample;
    return WriteShards(
        o, ingest.format, image_options, tok, base, &report, &progress, samples.size(), out,
        staging,
        [&](SampleSink* sink) {
          return ProcessSamples(samples, first, samples.size(), ingest.format == InputFormat::kWds,
                                o, image_options, tok.tokenizer.get(),
                                [sink](ProcessedSample&& s) { return sink->Add(std::move(s)); });
        },
        &shards);
  }();
  if (!written.ok()) {
    if (base) return written;  // the guard removes the staging folder
    return Status(written.code(), written.message() + KeepFinishedWork(staging, tok.trained));
  }
  guard.Disarm();
  interrupt_note.reset();  // published: there is nothing left to resume
  WarnUnknown(o, tok, report);
  PrintSummary(o, report, shards, timer.ElapsedSeconds());
  return Status::OK();
}

}  // namespace mm::pack
