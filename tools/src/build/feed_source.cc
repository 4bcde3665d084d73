// feed_source.cc: FeedSource (feed_source.h).
#include "build/feed_source.h"

#include <stdlib.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "ingest/feed.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

FeedSource::~FeedSource() {
  if (image_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(image_dir_, ec);  // only files IngestFeed wrote there
}

Result<IngestResult> FeedSource::Ingest(const FieldNames& fields, const fs::path& spill_dir) {
  std::string dir = (spill_dir / ".mmpack-feed-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    return ErrnoStatus(errno, "cannot make a folder for the fed images in " + spill_dir.string());
  }
  image_dir_ = dir;
  if (ready_fd_ >= 0) {
    MM_RETURN_NOT_OK(WriteAll(ready_fd_, "ready\n", 6, "cannot tell the writer to start"));
  }
  return IngestFeed(in_fd_, fields, image_dir_, spill_dir);
}

}  // namespace mm::pack
