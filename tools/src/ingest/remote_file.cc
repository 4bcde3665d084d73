// remote_file.cc: see remote_file.h.
#include "ingest/remote_file.h"

#include <archive.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "ingest/spill.h"
#include "mm/internal/set_files.h"

namespace mm::pack {
namespace {

using mm::reader::internal::SetFiles;

// `url` as the folder the reader's remote layer opens and the file's name in it.
struct RemoteFile {
  std::unique_ptr<SetFiles> folder;
  std::string name;
};

Result<RemoteFile> OpenRemoteFile(const std::string& url) {
  const size_t slash = url.find_last_of('/');
  const size_t scheme_end = url.find("://");
  if (slash == std::string::npos || scheme_end == std::string::npos || slash < scheme_end + 3 ||
      slash + 1 == url.size()) {
    return Status::InvalidArgument("'" + url + "' does not name a file (scheme://host/path/NAME)");
  }
  RemoteFile file;
  file.name = url.substr(slash + 1);
  mm::reader::RemoteOptions options;  // the reader's defaults: 5 tries, backoff, timeouts
  MM_ASSIGN_OR_RETURN(file.folder, SetFiles::Open(url.substr(0, slash), options));
  return file;
}

// One tar read by libarchive's callbacks: the block last fetched, and where the archive is.
struct TarStream {
  RemoteFile file;
  std::string url;
  int64_t size = 0;    // the object's bytes (HEAD)
  int64_t offset = 0;  // the next byte libarchive gets
  std::string block;   // bytes [block_start, block_start + block.size())
  int64_t block_start = 0;
  Status error;  // the failure libarchive was told of, with its code
};

la_ssize_t ReadBlock(archive* a, void* data, const void** buffer) {
  auto* s = static_cast<TarStream*>(data);
  if (s->offset >= s->size) return 0;
  const int64_t block_end = s->block_start + static_cast<int64_t>(s->block.size());
  if (s->offset < s->block_start || s->offset >= block_end) {
    const int64_t want = std::min(kRemoteBlockBytes, s->size - s->offset);
    auto bytes = s->file.folder->ReadRange(s->file.name, s->offset, want);
    if (!bytes.ok()) {
      s->error = bytes.status();
      archive_set_error(a, EIO, "%s", bytes.status().message().c_str());
      return ARCHIVE_FATAL;
    }
    if (bytes->empty()) {
      archive_set_error(a, EIO, "%s: the object ended at byte %lld of the %lld its HEAD gave",
                        s->url.c_str(), static_cast<long long>(s->offset),
                        static_cast<long long>(s->size));
      return ARCHIVE_FATAL;
    }
    s->block = std::move(*bytes);
    s->block_start = s->offset;
  }
  const int64_t at = s->offset - s->block_start;
  *buffer = s->block.data() + at;
  const int64_t n = static_cast<int64_t>(s->block.size()) - at;
  s->offset += n;
  return static_cast<la_ssize_t>(n);
}

// Skipped bytes are not fetched (a later read inside the current block is served from it).
la_int64_t SkipBytes(archive*, void* data, la_int64_t request) {
  auto* s = static_cast<TarStream*>(data);
  const int64_t n = std::max<int64_t>(0, std::min<int64_t>(request, s->size - s->offset));
  s->offset += n;
  return n;
}

int CloseStream(archive*, void*) { return ARCHIVE_OK; }  // TarArchive::source owns the stream

// `url` (raw) as the root the reader's remote layer opens and the file's name below it: the
// bucket of s3:// and gs://, the host of http(s)://, the folder of hf:// (whose revision may
// hold slashes). Empty when `url` names no file.
struct RootAndName {
  std::string root, name;
};
RootAndName SplitAtRoot(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return {};
  size_t slash =
      url.compare(0, scheme_end, "hf") == 0 ? url.find_last_of('/') : url.find('/', scheme_end + 3);
  if (slash == std::string::npos || slash < scheme_end + 3 || slash + 1 >= url.size()) return {};
  return {url.substr(0, slash), url.substr(slash + 1)};
}

// This thread's handle of the remote layer for `root` (one SetFiles per thread: set_files.h).
// At most a few dozen are kept: a manifest's images lie under one bucket or host.
Result<const SetFiles*> ThreadRoot(const std::string& root) {
  thread_local std::map<std::string, std::unique_ptr<SetFiles>> open;
  auto it = open.find(root);
  if (it != open.end()) return it->second.get();
  if (open.size() >= 32) open.clear();
  mm::reader::RemoteOptions options;  // the reader's defaults: 5 tries, backoff, timeouts
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SetFiles> files, SetFiles::Open(root, options));
  return open.emplace(root, std::move(files)).first->second.get();
}

}  // namespace

Result<RemoteFileStat> StatRemoteFile(const std::string& url) {
  MM_ASSIGN_OR_RETURN(RemoteFile file, OpenRemoteFile(url));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::RemoteFileInfo info, file.folder->Stat(file.name));
  return RemoteFileStat{info.exists, info.size, info.etag};
}

Result<TarArchive> OpenRemoteTar(const std::string& url) {
  auto stream = std::make_shared<TarStream>();
  MM_ASSIGN_OR_RETURN(stream->file, OpenRemoteFile(url));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::RemoteFileInfo info,
                      stream->file.folder->Stat(stream->file.name));
  if (!info.exists) return Status::NotFound("no such object: " + url);
  if (info.size < 0) {
    return Status::IOError(url + ": the server did not say its size (no Content-Length)");
  }
  stream->url = url;
  stream->size = info.size;
  TarArchive tar{stream, ArchiveReadPtr(archive_read_new())};
  ::archive* a = tar.get();
  if (a == nullptr) return Status::Internal("archive_read_new failed");
  archive_read_support_format_tar(a);
  archive_read_support_format_gnutar(a);
  archive_read_support_filter_all(a);
  archive_read_set_callback_data(a, stream.get());
  archive_read_set_read_callback(a, ReadBlock);
  archive_read_set_skip_callback(a, SkipBytes);
  archive_read_set_close_callback(a, CloseStream);
  if (archive_read_open1(a) != ARCHIVE_OK) {
    if (!stream->error.ok()) return stream->error;  // NotFound, Unsupported, IOError as they came
    const char* msg = archive_error_string(a);
    return Status::IOError("cannot open tar " + url + ": " + (msg ? msg : "unknown"));
  }
  return tar;
}

uint64_t RemoteFileStamp(const std::string& url) {
  static std::mutex mutex;
  static std::map<std::string, uint64_t> stamps;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = stamps.find(url);
    if (it != stamps.end()) return it->second;
  }
  uint64_t stamp = 0;
  auto stat = StatRemoteFile(url);
  if (stat.ok() && stat->exists) {
    const std::string text = std::to_string(stat->size) + "\n" + stat->etag;
    stamp = XXH3_64bits(text.data(), text.size());
    if (stamp == 0) stamp = 1;  // 0 is "cannot be asked"
  }
  std::lock_guard<std::mutex> lock(mutex);
  stamps[url] = stamp;
  return stamp;
}

Result<UniqueFd> FetchRemoteFile(const std::string& url, const std::filesystem::path& dir) {
  MM_ASSIGN_OR_RETURN(RemoteFile file, OpenRemoteFile(url));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::RemoteFileInfo info, file.folder->Stat(file.name));
  if (!info.exists) return Status::NotFound("no such object: " + url);
  MM_ASSIGN_OR_RETURN(UniqueFd fd, OpenSpillFile(dir));
  const std::string what = "cannot write the copy of " + url + " in " + (dir / "").string();
  // Blocks up to the size HEAD gave; without a size, until a block comes short. A server without
  // ranges sends a small file whole at once. A short block before the end, or another size or
  // ETag at a HEAD after the end, is an object replaced meanwhile: blocks of two versions would
  // make a manifest that never was.
  const std::string changed = url + " changed while it was read; build again (";
  for (int64_t offset = 0; info.size < 0 || offset < info.size;) {
    const int64_t want =
        info.size < 0 ? kRemoteBlockBytes : std::min(kRemoteBlockBytes, info.size - offset);
    MM_ASSIGN_OR_RETURN(std::string block, file.folder->ReadRange(file.name, offset, want));
    MM_RETURN_NOT_OK(WriteAll(fd.get(), block.data(), block.size(), what));
    offset += static_cast<int64_t>(block.size());
    if (static_cast<int64_t>(block.size()) < want) {
      if (info.size < 0) break;
      return Status::IOError(changed + "it ended at byte " + std::to_string(offset) + " of the " +
                             std::to_string(info.size) + " its HEAD gave)");
    }
  }
  MM_ASSIGN_OR_RETURN(mm::reader::internal::RemoteFileInfo after, file.folder->Stat(file.name));
  if (after.size != info.size || after.etag != info.etag) {
    return Status::IOError(changed + "size or ETag)");
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoStatus(errno, what);
  return fd;
}

Status ReadRemoteFile(const std::string& url, std::string* bytes, int64_t max_bytes) {
  bytes->clear();
  const RootAndName at = SplitAtRoot(url);
  if (at.name.empty()) {
    return Status::InvalidArgument("'" + url + "' does not name a file (scheme://host/path/NAME)");
  }
  MM_ASSIGN_OR_RETURN(const SetFiles* root, ThreadRoot(at.root));
  MM_ASSIGN_OR_RETURN(*bytes, root->Read(at.name, max_bytes));
  return Status::OK();
}

}  // namespace mm::pack
