// select.cc: see select.h.
#include "build/select.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "curate/filters.h"
#include "mm/internal/utf8.h"
#include "text/caption.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

Result<IngestResult> IngestInput(const BuildOptions& o, const fs::path& spill_dir,
                                 SampleSource* source, BuildReport* report) {
  FieldNames fields = o.fields;
  fields.max_caption_bytes = o.max_caption_bytes;  // longer ones are dropped by CheckCaptions
  MM_ASSIGN_OR_RETURN(IngestResult ingest,
                      source != nullptr ? source->Ingest(fields, spill_dir)
                                        : IngestToList(o.input, o.input_format, fields, spill_dir));
  // A feed's samples carry every kept field as a manifest's lines do.
  const bool manifest = ingest.format == InputFormat::kJsonl ||
                        ingest.format == InputFormat::kCsv || ingest.format == InputFormat::kTsv ||
                        ingest.format == InputFormat::kFeed;
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
      score_drops.push_back({std::move(issue.source), std::move(issue.key), std::move(issue.reason),
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

}  // namespace mm::pack
