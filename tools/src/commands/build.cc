// build.cc: `mmpack build RAW -o OUT` end to end (commands.h), as named stages in order:
//
//   ValidateOptions   option values main.cc does not check, into ImageOptions
//   CheckPaths        RAW and OUT: each refusal is one line, before anything is written
//   MakeStaging       OUT.mmpack-partial beside OUT (output_dir.h), removed on any failure
//   IngestInput       the input's samples (ingest/ingest.h); its issues become report entries
//   CheckCaptions     a sample keeps its good captions (text/caption.h); with none, dropped
//   MakeTokenizer     the given model, or one trained on the good captions (text/tokenizer.h)
//   RunPipeline       read, decode + fit, tokenize, compress; write in order (build_pipeline.h)
//   report.json       what was dropped and why (build_report.h)
//   WriteIndex        index.json, last (mm/internal/index_json.h)
//   Publish           the finished set renamed to OUT (output_dir.h)
//   PrintSummary      one line on stderr (build_report.h)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands/build_append.h"
#include "commands/build_pipeline.h"
#include "commands/build_report.h"
#include "commands/commands.h"
#include "commands/output_dir.h"
#include "commands/progress.h"
#include "commands/set_lock.h"
#include "commands/set_publish.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
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
Result<IngestResult> IngestInput(const BuildOptions& o, BuildReport* report) {
  MM_ASSIGN_OR_RETURN(IngestResult ingest, Ingest(o.input, o.input_format, o.fields));
  const bool manifest = ingest.format == InputFormat::kJsonl ||
                        ingest.format == InputFormat::kCsv || ingest.format == InputFormat::kTsv;
  if (!manifest && (!o.fields.image.empty() || !o.fields.caption.empty() ||
                    !o.filters.min_score_field.empty() || !o.keep_fields.empty())) {
    return Status::InvalidArgument(
        "--image-field, --caption-field, --keep-fields and --min-score read JSONL/CSV/TSV "
        "manifests; '" +
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
// of its first bad caption).
void CheckCaptions(std::vector<RawSample>* samples, int64_t max_caption_bytes,
                   BuildReport* report) {
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    RawSample& s = (*samples)[i];
    std::vector<std::string> good;
    const char* first_reason = nullptr;
    for (size_t c = 0; c < s.captions.size(); ++c) {
      const char* reason = CheckCaption(s.captions[c], max_caption_bytes);
      if (reason == nullptr) {
        good.push_back(std::move(s.captions[c]));
      } else {
        std::string().swap(s.captions[c]);  // a caption over the limit is freed at once
        if (first_reason == nullptr) first_reason = reason;
        report->dropped_captions.push_back({s.source, s.key, static_cast<int64_t>(c), reason});
      }
    }
    if (good.empty()) {
      report->dropped.push_back({s.source, s.key, first_reason ? first_reason : "empty_caption",
                                 std::to_string(s.captions.size()) + " caption(s), none usable"});
      continue;
    }
    s.captions = std::move(good);
    if (kept != i) (*samples)[kept] = std::move(s);
    ++kept;
  }
  samples->resize(kept);
}

// --min-score: the samples whose score field is missing or low become drops.
Status FilterScores(const BuildOptions& o, std::vector<RawSample>* samples, BuildReport* report) {
  if (o.filters.min_score_field.empty()) return Status::OK();
  const auto& extra = o.fields.extra;
  const size_t at =
      std::find(extra.begin(), extra.end(), o.filters.min_score_field) - extra.begin();
  std::vector<IngestIssue> dropped;
  FilterByScore(o.filters, at, samples, &dropped);
  for (IngestIssue& d : dropped) {
    report->dropped.push_back(
        {std::move(d.source), std::move(d.key), std::move(d.reason), std::move(d.detail)});
  }
  return Status::OK();
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
// the field); a kept field that no sample has gets a note, as it is most likely misspelt.
void CheckKeptFields(const BuildOptions& o, std::vector<RawSample>* samples, BuildReport* report) {
  if (o.keep_fields.empty()) return;
  std::vector<int64_t> present(o.keep_fields.size(), 0);
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    RawSample& s = (*samples)[i];
    const char* reason = nullptr;
    size_t f = 0;
    for (; f < o.keep_fields.size() && reason == nullptr; ++f) {
      reason = CheckFieldValue(s.fields[f], o.max_caption_bytes);
    }
    if (reason != nullptr) {
      report->dropped.push_back(
          {s.source, s.key, reason, "kept field '" + o.keep_fields[f - 1] + "' cannot be stored"});
      continue;
    }
    for (f = 0; f < o.keep_fields.size(); ++f) {
      present[f] += s.fields[f].type != FieldValue::Type::kMissing;
    }
    if (kept != i) (*samples)[kept] = std::move(s);
    ++kept;
  }
  samples->resize(kept);
  for (size_t f = 0; f < o.keep_fields.size(); ++f) {
    if (present[f] == 0 && !o.quiet && kept > 0) {
      std::fprintf(stderr, "mmpack build: note: kept field '%s' has no value in any sample\n",
                   o.keep_fields[f].c_str());
    }
  }
}

// The tokenizer of the set, and what index.json says of it.
struct SetTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;  // null with --tokenizer none
  std::string sha256;                    // of the model bytes, as OUT/tokenizer.model holds them
  bool trained = false;                  // trained on the captions here
};

// The given --tokenizer, or a unigram model trained on the good captions; either way written
// to `staging`/tokenizer.model.
Result<SetTokenizer> MakeTokenizer(const BuildOptions& o, const std::vector<RawSample>& samples,
                                   const fs::path& staging) {
  SetTokenizer out;
  if (o.tokenizer == kNoTokenizer) return out;  // text only: no model, no tokenizer.model
  std::string model_bytes;
  if (!o.tokenizer.empty()) {
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
  } else {
    // Trained on the text the tokenizer will see (--lowercase, --normalize).
    std::vector<std::string> normalized;
    if (!o.text.identity()) {
      for (const RawSample& s : samples) {
        for (const std::string& c : s.captions) {
          MM_ASSIGN_OR_RETURN(std::string n, NormalizeForTokenizer(c, o.text));
          normalized.push_back(std::move(n));
        }
      }
    }
    std::vector<std::string_view> captions;
    for (const RawSample& s : samples) {
      for (const std::string& c : s.captions) captions.push_back(c);
    }
    if (!o.text.identity()) captions.assign(normalized.begin(), normalized.end());
    if (!o.quiet) {
      std::fprintf(stderr,
                   "mmpack build: training a SentencePiece unigram tokenizer "
                   "(vocab %d) on %zu captions\n",
                   o.vocab_size, captions.size());
    }
    std::string note;
    MM_ASSIGN_OR_RETURN(model_bytes, Tokenizer::Train(captions, o.vocab_size, &note));
    if (!note.empty() && !o.quiet) std::fprintf(stderr, "mmpack build: %s\n", note.c_str());
    out.trained = true;
  }
  out.sha256 = Sha256Hex(model_bytes);
  MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kTokenizerFile), model_bytes));
  MM_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::FromSerialized(std::move(model_bytes)));
  return out;
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
  index.build_options = {
      {"input_format", std::string(ToString(format))}, {"max_pixels", o.max_pixels},
      {"max_caption_bytes", o.max_caption_bytes},      {"shard_size", o.shard_size},
      {"samples_per_shard", o.samples_per_shard},      {"vocab_size", o.vocab_size}};
  FilterOptionsJson(o, &index.build_options);
  index.dropped_by_reason = report.ByReason();
  return WriteText(staging / std::string(mm::format::kIndexFile),
                   mm::reader::internal::EncodeIndex(index));
}

}  // namespace

Status RunBuild(const BuildOptions& given) {
  Progress timer(0, true);
  MM_ASSIGN_OR_RETURN(ImageOptions image_options, ValidateOptions(given));
  const fs::path out = NormalOutput(given.output);
  MM_ASSIGN_OR_RETURN(SetLock lock, LockOutput(out));  // held until return (set_lock.h)
  MM_RETURN_NOT_OK(RecoverInterruptedPublish(out, std::cerr));
  MM_RETURN_NOT_OK(CheckPaths(given, out));
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
    base = std::move(b);
  }
  MM_RETURN_NOT_OK(InitVips());
  // The staging folder beside OUT proves OUT writable before any long work; a failure
  // anywhere below removes it, so OUT is never left half-built.
  MM_ASSIGN_OR_RETURN(fs::path staging, MakeStaging(out));
  StagingGuard guard(staging);

  BuildReport report;
  MM_ASSIGN_OR_RETURN(IngestResult ingest, IngestInput(o, &report));
  std::vector<RawSample>& samples = ingest.samples;
  CheckCaptions(&samples, o.max_caption_bytes, &report);
  MM_RETURN_NOT_OK(FilterScores(o, &samples, &report));
  CheckKeptFields(o, &samples, &report);
  if (base) DropKeysOfBase(*base, &samples, &report);
  if (samples.empty()) {
    return Status::InvalidArgument(
        "no usable sample in '" + o.input + "' (format " + std::string(ToString(ingest.format)) +
        ")" + (report.dropped.empty() ? std::string() : "; dropped " + report.ReasonsText()));
  }
  MM_ASSIGN_OR_RETURN(SetTokenizer tok, MakeTokenizer(o, samples, staging));
  const int64_t first_shard = base ? static_cast<int64_t>(base->index.info.shards.size()) : 0;
  MM_ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer,
                      MakeWriter(o, staging, tok.sha256, first_shard));
  MM_RETURN_NOT_OK(RunPipeline(&samples, ingest.format == InputFormat::kWds, o, image_options,
                               tok.tokenizer.get(), writer.get(), &report));
  MM_ASSIGN_OR_RETURN(std::vector<mm::reader::ShardEntry> shards, writer->Finish());

  if (report.written == 0) {
    if (base) {
      return Status::InvalidArgument("no sample of '" + o.input + "' could be appended; dropped " +
                                     report.ReasonsText() + " (OUT is unchanged)");
    }
    MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kReportFile),
                               ReportJson(o, ingest.format, report)));
    return Status::InvalidArgument("no sample of '" + o.input + "' could be used; dropped " +
                                   report.ReasonsText());
  }
  if (base) {
    MM_RETURN_NOT_OK(AssembleAppend(o, ingest.format, *base, shards, report, out, staging));
  } else {
    MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kReportFile),
                               ReportJson(o, ingest.format, report)));
    MM_RETURN_NOT_OK(WriteIndex(o, ingest.format, image_options, tok, shards, report, staging));
  }
  MM_RETURN_NOT_OK(Publish(staging, out));
  guard.Disarm();
  WarnUnknown(o, tok, report);
  PrintSummary(o, report, shards, timer.ElapsedSeconds());
  return Status::OK();
}

}  // namespace mm::pack
