// feed_source.cc: FeedSource (feed_source.h).
#include "build/feed_source.h"

#include <cerrno>
#include <string>
#include <system_error>

#include "ingest/feed.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

fs::path FeedImagePath(const fs::path& out) { return fs::path(out.string() + ".mmpack-feed"); }

FeedSource::~FeedSource() {
  if (!made_) return;
  std::error_code ec;
  fs::remove_all(image_dir_, ec);  // only files IngestFeed wrote there
}

Result<IngestResult> FeedSource::Ingest(const FieldNames& fields, const fs::path& spill_dir) {
  std::error_code ec;
  fs::remove_all(image_dir_, ec);  // a killed fed build's, under the lock that OUT's build holds
  if (!fs::create_directory(image_dir_, ec) || ec) {
    return Status::IOError("cannot make " + image_dir_.string() + " for the fed images" +
                           (ec ? ": " + ec.message() : std::string()));
  }
  made_ = true;
  if (ready_fd_ >= 0) {
    MM_RETURN_NOT_OK(WriteAll(ready_fd_, "ready\n", 6, "cannot tell the writer to start"));
  }
  return IngestFeed(in_fd_, fields, image_dir_, spill_dir);
}

}  // namespace mm::pack
