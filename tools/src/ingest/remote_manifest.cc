// remote_manifest.cc: a JSONL, CSV or TSV manifest at a URL (IngestRemoteManifest, formats.h).
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ingest/formats.h"
#include "ingest/manifest.h"
#include "ingest/remote_file.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// The manifest of the remote folder `folder`: its Hugging Face `metadata.jsonl`, else
// `metadata.csv` (HEAD each; `format`, when given, picks one). Object stores and web servers
// are not listed, so no other name is looked for.
Result<std::string> ManifestInRemoteFolder(const std::string& folder, InputFormat format) {
  for (const char* name : {"metadata.jsonl", "metadata.csv"}) {
    if (format != InputFormat::kAuto && ManifestFormatOfName(name) != format) continue;
    MM_ASSIGN_OR_RETURN(RemoteFileStat stat, StatRemoteFile(folder + "/" + name));
    if (stat.exists) return folder + "/" + name;
  }
  return Status::NotFound(
      "no metadata.jsonl or metadata.csv at " + folder +
      "/ (a Hugging Face imagefolder); mmpack does not list remote folders: name the manifest (" +
      folder + "/captions.jsonl) or the tars (" + folder + "/{00000..00099}.tar)");
}

// A .json manifest: JSONL when its first line is a sample (JsonManifestFormat), else refused.
Result<InputFormat> JsonFormat(const ManifestFile& manifest) {
  std::string head(size_t{1} << 20, '\0');
  const ssize_t n = ::pread(manifest.fd.get(), head.data(), head.size(), 0);
  if (n < 0) return ErrnoStatus(errno, "cannot read the copy of " + manifest.display);
  head.resize(static_cast<size_t>(n));
  if (JsonManifestFormat(std::move(head)) == InputFormat::kJsonl) return InputFormat::kJsonl;
  return Status::InvalidArgument(
      manifest.display +
      " is a COCO captions JSON: mmpack build reads COCO from local disk only (its images/ "
      "fallback looks into a folder); download it, or write it as JSONL");
}

}  // namespace

Result<IngestResult> IngestRemoteManifest(const std::string& url, InputFormat format,
                                          const FieldNames& fields, const fs::path& spill_dir) {
  if (format != InputFormat::kAuto && format != InputFormat::kJsonl &&
      format != InputFormat::kCsv && format != InputFormat::kTsv) {
    return Status::InvalidArgument(
        "'" + url + "': --input-format " + std::string(ToString(format)) +
        " is not read from a URL; mmpack build reads WebDataset tars (.tar, brace lists) and "
        "JSONL, CSV or TSV manifests there (a remote folder is not listed: only its Hugging "
        "Face metadata.jsonl or metadata.csv is found)");
  }
  std::string manifest_url = url;
  while (!manifest_url.empty() && manifest_url.back() == '/') manifest_url.pop_back();
  const InputFormat named = ManifestFormatOfName(manifest_url);
  const bool folder =
      url.back() == '/' || (format == InputFormat::kAuto && named == InputFormat::kAuto);
  if (folder) {
    MM_ASSIGN_OR_RETURN(manifest_url, ManifestInRemoteFolder(manifest_url, format));
  }
  if (format == InputFormat::kAuto) format = ManifestFormatOfName(manifest_url);
  MM_ASSIGN_OR_RETURN(ManifestFile manifest, FetchManifest(manifest_url, spill_dir));
  if (format == InputFormat::kCoco) {
    MM_ASSIGN_OR_RETURN(format, JsonFormat(manifest));
  }
  return IngestManifest(manifest, format, fields, spill_dir);
}

}  // namespace mm::pack
