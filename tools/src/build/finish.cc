// finish.cc: the end of every build (build.h): report.json, index.json last, the set published
// as OUT, and the lines that sum it up.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "build/build.h"
#include "image/colour.h"
#include "mm/format.h"
#include "mm/internal/index_json.h"
#include "set/set_publish.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

// The writer of the set's shards, numbered from `first_shard`.
Result<std::unique_ptr<ShardWriter>> Build::MakeWriter(int64_t first_shard) const {
  const BuildOptions& o = plan_.options;
  WriterOptions wo;
  wo.first_shard_index = first_shard;
  wo.output_dir = plan_.staging.string();
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
  wo.tokenizer_sha256 = tok_.sha256;
  wo.metadata_fields = o.keep_fields;
  wo.check_unique_keys = false;  // unique by construction: MakeKeysUnique, and --append's drops
  return ShardWriter::Create(wo);
}

// index.json, written last: what the set holds and how it was built.
Status Build::WriteIndex() const {
  const BuildOptions& o = plan_.options;
  const SetTokenizer& tok = tok_;
  const BuildReport& report = report_;
  const InputFormat format = format_;
  mm::reader::internal::IndexDocument index;
  mm::reader::SetInfo& set = index.info;
  set.image_height = o.image_height;
  set.image_width = o.image_width;
  set.resize_mode = o.resize_mode;
  set.compression = o.compression;
  set.compression_level = o.compression_level;
  set.image_codec = o.image_codec;
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
  set.shards = shards_;
  index.background = ColourHex(plan_.image.background);
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
  return WriteText(plan_.staging / std::string(mm::format::kIndexFile),
                   mm::reader::internal::EncodeIndex(index));
}

// The end of every build: report.json and index.json (or, for --append, OUT's merged with
// the new ones), the checkpoints and parts removed, the set published as OUT.
Status Build::Finish() {
  const BuildOptions& o = plan_.options;
  const BuildReport& report = report_;
  const fs::path& staging = plan_.staging;
  if (report.written == 0) {
    if (base_) {
      return Status::InvalidArgument("no sample of '" + o.input + "' could be appended; dropped " +
                                     report.ReasonsText() + " (OUT is unchanged)");
    }
    MM_RETURN_NOT_OK(
        WriteText(staging / std::string(mm::format::kReportFile), ReportJson(o, format_, report)));
    return Status::InvalidArgument("no sample of '" + o.input + "' could be used; dropped " +
                                   report.ReasonsText());
  }
  if (base_) {
    MM_RETURN_NOT_OK(AssembleAppend(plan_, *base_, {format_, shards_, report}));
  } else {
    MM_RETURN_NOT_OK(
        WriteText(staging / std::string(mm::format::kReportFile), ReportJson(o, format_, report)));
    MM_RETURN_NOT_OK(WriteIndex());
  }
  MM_RETURN_NOT_OK(RemoveResumeLog(staging));
  return PublishListed(staging, plan_.out, std::cerr);  // what the build wrote, and nothing else
}

// The <unk> warning and the one-line summary on stderr.
void Build::Summarise() const {
  WarnUnknown(o(), tok_, report_);
  PrintSummary(o(), report_, shards_, timer_.ElapsedSeconds());
}

}  // namespace mm::pack
