// manifest.cc: see manifest.h.
#include "ingest/manifest.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "ingest/formats.h"
#include "ingest/remote_file.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// A manifest saved as UTF-16 ("Unicode" in some editors) fails every line as "not JSON" or
// every header name; say what it is instead.
Status CheckNotUtf16(const ManifestFile& m) {
  unsigned char head[2] = {0, 0};
  const ssize_t n = ::pread(m.fd.get(), head, 2, 0);
  if (n < 0) return ErrnoStatus(errno, "cannot read " + m.display);
  if (n == 2 && ((head[0] == 0xFF && head[1] == 0xFE) || (head[0] == 0xFE && head[1] == 0xFF))) {
    return Status::InvalidArgument(
        m.display + " is UTF-16 text (byte-order mark " + (head[0] == 0xFF ? "FF FE" : "FE FF") +
        "); mmpack reads UTF-8 manifests: convert it, e.g. iconv -f UTF-16 -t UTF-8");
  }
  return Status::OK();
}

}  // namespace

Result<ManifestFile> OpenLocalManifest(const fs::path& file) {
  MM_ASSIGN_OR_RETURN(RegularFile opened, OpenRegularFile(file.string()));
  ManifestFile m;
  m.fd = std::move(opened.fd);
  m.name = file.filename().string();
  m.display = file.string();
  m.base = file.parent_path().string();
  MM_RETURN_NOT_OK(CheckNotUtf16(m));
  return m;
}

Result<ManifestFile> FetchManifest(const std::string& url, const fs::path& spill_dir) {
  ManifestFile m;
  MM_ASSIGN_OR_RETURN(m.fd, FetchRemoteFile(url, spill_dir));
  const size_t slash = url.find_last_of('/');
  m.name = url.substr(slash + 1);
  m.display = url;
  m.base = url.substr(0, slash);
  MM_RETURN_NOT_OK(CheckNotUtf16(m));
  return m;
}

Result<IngestResult> IngestManifest(const ManifestFile& manifest, InputFormat format,
                                    const FieldNames& fields, const fs::path& spill_dir) {
  switch (format) {
    case InputFormat::kJsonl:
      return IngestJsonl(manifest, fields, spill_dir);
    case InputFormat::kCsv:
    case InputFormat::kTsv:
      return IngestDelimited(manifest, format, fields, spill_dir);
    default:
      return Status::Internal("input format " + std::string(ToString(format)) +
                              " is not a manifest of lines or rows");
  }
}

}  // namespace mm::pack
