// wds.h: WebDataset tars through libarchive (private to ingest/: the wds reader and
// ImageReader). libarchive's error convention becomes a Status here and in wds.cc only.
#pragma once

#include <memory>
#include <string>

#include "base/c_handles.h"
#include "mm/status.h"

namespace mm::pack {

/// An open tar: libarchive's reader and, for a tar at a URL, the stream its callbacks read
/// (remote_file.h), which outlives the reader (members go in reverse order).
struct TarArchive {
  std::shared_ptr<void> source;
  ArchiveReadPtr archive;
  ::archive* get() const { return archive.get(); }
};

/// Opens the tar (or .tar.gz etc.) at `path`, a local path or a URL (remote_file.h), for
/// reading member by member.
/// Errors: NotFound, IOError (libarchive's message), Unsupported (a server without range
/// requests), Internal.
[[nodiscard]] Result<TarArchive> OpenTar(const std::string& path);

/// Reads the current member's data into `bytes`. A sparse member (GNU/PAX sparse maps) is
/// refused at its first hole, before anything is allocated for it: a 60-byte member can
/// declare a 60 GB hole, and holes are never image or caption bytes.
/// Errors: Unsupported (a sparse member; the archive can go on to the next header), IOError
/// (the archive is damaged).
[[nodiscard]] Status ReadMemberData(archive* a, std::string* bytes);

}  // namespace mm::pack
