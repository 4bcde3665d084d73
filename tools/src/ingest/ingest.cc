// ingest.cc: see ingest.h. Picks the format's reader (formats.h), then makes every sample
// storable: names that are UTF-8 without a NUL, keys unique in the set.
#include "ingest/ingest.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/brace.h"
#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "ingest/sample_list.h"
#include "mm/internal/utf8.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// A URL: WebDataset tars (remote_file.h) or a manifest (IngestRemoteManifest).
Result<IngestResult> IngestUrl(const std::string& input, InputFormat format,
                               const FieldNames& fields, const fs::path& spill_dir) {
  const bool tars = HasBraceGroup(input) || fs::path(input).extension() == ".tar";
  if (format == InputFormat::kWds || (format == InputFormat::kAuto && tars)) {
    return IngestWds(input, fields, spill_dir);
  }
  return IngestRemoteManifest(input, format, fields, spill_dir);
}

Result<IngestResult> IngestAny(const std::string& input, InputFormat format,
                               const FieldNames& fields, const fs::path& spill_dir) {
  std::error_code ec;
  fs::path p(input);
  if (IsRemoteUrl(input)) return IngestUrl(input, format, fields, spill_dir);
  if (!fs::exists(p, ec) && HasBraceGroup(input)) {  // shards-{00000..00099}.tar
    if (format != InputFormat::kAuto && format != InputFormat::kWds) {
      return Status::InvalidArgument("'" + input + "' is a brace list of WebDataset tars; " +
                                     "--input-format " + std::string(ToString(format)) +
                                     " reads one file");
    }
    return IngestWds(input, fields, spill_dir);
  }
  if (format == InputFormat::kAuto) {
    MM_ASSIGN_OR_RETURN(format, DetectInputFormat(input));
    if (fs::is_directory(p, ec)) {
      std::string manifest = ManifestInFolder(p);
      if (!manifest.empty()) p = manifest;
    }
  }
  if (!fs::exists(p, ec)) return Status::NotFound("no such file or directory: " + input);
  if (format == InputFormat::kFiles) {
    if (!fs::is_directory(p, ec)) return Status::InvalidArgument(input + " is not a folder");
    return IngestFiles(p, spill_dir);
  }
  if (format == InputFormat::kWds) return IngestWds(p.string(), fields, spill_dir);
  if (fs::is_directory(p, ec)) {
    return Status::InvalidArgument(input + " is a folder; --input-format " +
                                   std::string(ToString(format)) + " needs a file");
  }
  MM_ASSIGN_OR_RETURN(ManifestFile manifest, OpenLocalManifest(p));  // UTF-16 refused there
  if (format == InputFormat::kCoco) return IngestCoco(p, spill_dir);
  return IngestManifest(manifest, format, fields, spill_dir);
}

// "caf\xE9.jpg": the bytes of `s` with each byte that breaks UTF-8 written as \xHH, so a
// report can name a file whose name is not UTF-8.
std::string EscapeInvalidUtf8(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    size_t bad = FirstInvalidUtf8(s);
    if (bad == std::string_view::npos) bad = s.size();
    out.append(s.substr(0, bad));
    if (bad == s.size()) break;
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[bad]));
    out.append(hex);
    s.remove_prefix(bad + 1);
  }
  return out;
}

// Sources and keys are UTF-8 strings in the shards (FORMAT.md) and cannot hold a NUL: a
// sample whose image path (file name, tar member or tar name) is not valid UTF-8 is
// reported as invalid_utf8 instead of being written into a set that `mmpack verify` rejects.
// True when `s` can be stored; otherwise its issue is appended.
bool StorableNames(const RawSample& s, std::vector<IngestIssue>* issues) {
  const size_t bad = FirstInvalidUtf8(s.source);
  if (bad != std::string_view::npos || FirstInvalidUtf8(s.key) != std::string_view::npos) {
    const std::string shown = EscapeInvalidUtf8(s.source);
    issues->push_back({shown, EscapeInvalidUtf8(s.key), "invalid_utf8",
                       "image path '" + shown +
                           "' is not valid UTF-8, so it cannot be stored as the "
                           "sample's source; rename it"});
    return false;
  }
  if (s.source.find('\0') != std::string::npos || s.key.find('\0') != std::string::npos) {
    issues->push_back({s.source.substr(0, s.source.find('\0')), "", "invalid_manifest_line",
                       "image path holds a NUL"});
    return false;
  }
  return true;
}

}  // namespace

IngestResult::IngestResult() = default;
IngestResult::~IngestResult() = default;
IngestResult::IngestResult(IngestResult&&) noexcept = default;
IngestResult& IngestResult::operator=(IngestResult&&) noexcept = default;

Result<IngestResult> IngestToList(const std::string& input, InputFormat format,
                                  const FieldNames& fields, const fs::path& spill_dir) {
  if (format == InputFormat::kFeed) {
    return Status::InvalidArgument(
        "--input-format feed reads the samples a program streams on stdin (mmpack.Writer), "
        "with RAW '-'");
  }
  MM_ASSIGN_OR_RETURN(IngestResult result, IngestAny(input, format, fields, spill_dir));
  MM_RETURN_NOT_OK(FinishIngestList(fields, spill_dir, &result));
  return result;
}

Status FinishIngestList(const FieldNames& fields, const fs::path& spill_dir, IngestResult* result) {
  // One pass over what the format made: the storable samples, captions cut as FieldNames says,
  // into the list MakeKeysUnique takes.
  if (!result->list) return Status::Internal("input format without a sample list");
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> list, SampleList::Create(spill_dir));
  MM_RETURN_NOT_OK(ForEachSample(*result->list, [&](uint64_t, RawSample& s) -> Status {
    CapCaptions(&s.captions, fields.max_caption_bytes);
    if (!StorableNames(s, &result->issues)) return Status::OK();
    return list->Add(s);
  }));
  MM_RETURN_NOT_OK(list->Finish());
  MM_RETURN_NOT_OK(MakeKeysUnique(&list));
  result->list = std::move(list);
  return Status::OK();
}

Result<IngestResult> Ingest(const std::string& input, InputFormat format,
                            const FieldNames& fields) {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  MM_ASSIGN_OR_RETURN(IngestResult result,
                      IngestToList(input, format, fields, ec ? fs::path("/tmp") : tmp));
  MM_RETURN_NOT_OK(ForEachSample(*result.list, [&](uint64_t, RawSample& s) {
    result.samples.push_back(std::move(s));
    return Status::OK();
  }));
  result.list.reset();
  return result;
}

}  // namespace mm::pack
