// manifest.h: a JSONL, CSV or TSV manifest to read (private to ingest/): its bytes, open, and
// the folder or URL its image paths resolve against (image_url.h). A manifest at a URL is read
// from a copy in the build's spill folder (remote_file.h), never from the user's folders.
#pragma once

#include <filesystem>
#include <string>

#include "ingest/ingest.h"
#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::pack {

struct ManifestFile {
  UniqueFd fd;          // a regular file: the manifest, or the copy of one at a URL
  std::string name;     // its file name: issues name its lines "captions.jsonl:12"
  std::string display;  // its path or URL, for errors
  std::string base;     // its folder, or the URL of its folder (no trailing '/')
};

/// The local manifest `file`. Errors: those of OpenRegularFile; InvalidArgument (UTF-16 text,
/// which every line or header name would fail as).
[[nodiscard]] Result<ManifestFile> OpenLocalManifest(const std::filesystem::path& file);

/// The manifest at `url`, copied into an unnamed file in `spill_dir` (FetchRemoteFile).
/// Errors: those of FetchRemoteFile; InvalidArgument (UTF-16 text).
[[nodiscard]] Result<ManifestFile> FetchManifest(const std::string& url,
                                                 const std::filesystem::path& spill_dir);

/// Reads `manifest` as `format` (kJsonl, kCsv or kTsv: IngestJsonl, IngestDelimited).
/// Errors: theirs; Internal (another format).
[[nodiscard]] Result<IngestResult> IngestManifest(const ManifestFile& manifest, InputFormat format,
                                                  const FieldNames& fields,
                                                  const std::filesystem::path& spill_dir);

}  // namespace mm::pack
