// image_reader.cc: ImageReader (ingest.h), the encoded bytes of each sample: a plain file (local
// or at a URL), or a tar member read in one sequential pass over the tar.
#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <string>

#include "ingest/ingest.h"
#include "ingest/remote_file.h"
#include "ingest/wds.h"
#include "mm/internal/file.h"

namespace mm::pack {

struct ImageReader::Tar {
  std::string path;
  TarArchive archive;
  int64_t next_index = 0;  // index of the header the next archive_read_next_header returns
};

Status ReadImageFile(const std::string& path, std::string* bytes, int64_t max_bytes) {
  if (IsRemoteUrl(path)) return ReadRemoteFile(path, bytes, max_bytes);
  return ReadRegularFile(path, bytes, max_bytes);
}

ImageReader::ImageReader() = default;
ImageReader::~ImageReader() = default;

Status ImageReader::Read(const RawSample& sample, std::string* bytes, int64_t max_bytes) {
  if (sample.tar_member_index < 0) return ReadImageFile(sample.path, bytes, max_bytes);
  if (!tar_ || tar_->path != sample.path || tar_->next_index > sample.tar_member_index) {
    MM_ASSIGN_OR_RETURN(TarArchive a, OpenTar(sample.path));
    tar_ = std::make_unique<Tar>();
    tar_->path = sample.path;
    tar_->archive = std::move(a);
  }
  archive_entry* entry;
  while (tar_->next_index <= sample.tar_member_index) {
    int r = archive_read_next_header(tar_->archive.get(), &entry);
    if (r == ARCHIVE_EOF || r < ARCHIVE_WARN) {
      tar_.reset();
      return Status::NotFound("tar member " + sample.tar_member + " not found in " + sample.path);
    }
    ++tar_->next_index;
  }
  if (max_bytes >= 0 && archive_entry_size_is_set(entry) != 0 &&
      archive_entry_size(entry) > max_bytes) {
    bytes->clear();
    return Status::OutOfRange("tar member " + sample.tar_member + " is " +
                              std::to_string(archive_entry_size(entry)) + " bytes, over the " +
                              std::to_string(max_bytes) + " bytes read of one file");
  }
  Status st = ReadMemberData(tar_->archive.get(), bytes);
  if (!st.ok() && st.code() != StatusCode::kUnsupported) tar_.reset();  // damaged: reopen
  return st;
}

}  // namespace mm::pack
