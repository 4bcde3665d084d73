// set_files.cc: see mm/internal/set_files.h.
#include "mm/internal/set_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "mm/internal/file.h"
#include "remote/cache.h"
#include "remote/http.h"
#include "remote/location.h"
#include "remote/object_upload.h"

namespace mm::reader::internal {
namespace {

class LocalSetFiles final : public SetFiles {
 public:
  explicit LocalSetFiles(std::string dir) : dir_(std::move(dir)) {}
  bool remote() const override { return false; }
  const std::string& root() const override { return dir_; }
  // As std::filesystem joins paths (an absolute name stays itself: the checks that follow
  // refuse what is not a regular file of ours by what it is).
  std::string Display(const std::string& name) const override {
    return (std::filesystem::path(dir_) / name).string();
  }
  Result<std::string> Read(const std::string& name, int64_t max_bytes) const override {
    std::string bytes;
    MM_RETURN_NOT_OK(ReadRegularFile(Display(name), &bytes, max_bytes));
    return bytes;
  }
  Result<std::string> ReadRange(const std::string& name, int64_t offset,
                                int64_t size) const override {
    if (offset < 0 || size < 0) return Status::InvalidArgument("negative range of " + name);
    MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(Display(name)));
    std::string bytes(static_cast<size_t>(size), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::pread(file.fd.get(), bytes.data() + got, bytes.size() - got,
                                static_cast<off_t>(offset + static_cast<int64_t>(got)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "cannot read " + Display(name));
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
    return bytes;
  }
  Result<bool> Exists(const std::string& name) const override {
    struct stat st;
    return ::lstat(Display(name).c_str(), &st) == 0;
  }
  Result<LocalShardFile> Shard(const ShardEntry& entry) const override {
    return LocalShardFile{Display(entry.file), nullptr};
  }
  Status Put(const std::string& name, const std::string&, const PutOptions&) const override {
    return Status::Unsupported(Display(name) + ": uploading into a local directory");
  }
  Result<RemoteFileInfo> Stat(const std::string& name) const override {
    return Status::Unsupported(Display(name) + ": a local file, not an object");
  }
  Status CheckWritable() const override {
    return Status::Unsupported(dir_ + ": uploading into a local directory");
  }
  Status Remove(const std::string& name) const override {
    return Status::Unsupported(Display(name) + ": removing from a local directory");
  }

 private:
  std::string dir_;
};

class RemoteSetFiles final : public SetFiles {
 public:
  RemoteSetFiles(Location location, RemoteOptions options)
      : location_(std::move(location)), options_(std::move(options)) {}
  bool remote() const override { return true; }
  const std::string& root() const override { return location_.text; }
  std::string Display(const std::string& name) const override { return location_.Display(name); }
  Result<std::string> Read(const std::string& name, int64_t max_bytes) const override {
    MM_ASSIGN_OR_RETURN(const HttpRequest request, Request(name));
    return ThreadHttpClient().GetText(request, options_, max_bytes);
  }
  Result<std::string> ReadRange(const std::string& name, int64_t offset,
                                int64_t size) const override {
    if (offset < 0 || size < 0) return Status::InvalidArgument("negative range of " + name);
    if (size == 0) return std::string();
    MM_ASSIGN_OR_RETURN(HttpRequest request, Request(name));
    request.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                              std::to_string(offset + size - 1));
    auto bytes = ThreadHttpClient().GetText(request, options_, size);
    if (!bytes.ok() && bytes.status().code() == StatusCode::kOutOfRange) {
      return Status::Unsupported("GET " + Display(name) + " with Range: bytes=" +
                             std::to_string(offset) + "-...: the server sent more than the " +
                             std::to_string(size) + " bytes asked for (it does not serve "
                             "range requests)");
    }
    return bytes;
  }
  Result<bool> Exists(const std::string& name) const override {
    MM_ASSIGN_OR_RETURN(const HttpRequest request, Request(name));
    return ThreadHttpClient().Exists(request, options_);
  }
  Result<LocalShardFile> Shard(const ShardEntry& entry) const override {
    MM_ASSIGN_OR_RETURN(const HttpRequest request, Request(entry.file));
    if (!cache_) {  // made at the first shard: reading files or streaming ranges needs none
      MM_ASSIGN_OR_RETURN(cache_, CacheDir::Get(options_.cache_dir));
    }
    auto fetch = [&](DownloadSink* sink) {
      return ThreadHttpClient().Get(request, options_, sink, entry.bytes);
    };
    MM_ASSIGN_OR_RETURN(CachedFile file, cache_->Acquire(location_.text, entry, Display(entry.file),
                                                         options_, fetch, &counters_));
    LocalShardFile out;
    out.path = file.path;
    // The shared flock on the cached file is the pin: it lives as long as `hold`.
    auto owned = std::make_shared<CachedFile>(std::move(file));
    std::shared_ptr<CacheDir> cache = cache_;
    out.hold = std::shared_ptr<const void>(owned.get(), [owned, cache](const void*) mutable {
      owned.reset();
      cache->Released();
    });
    return out;
  }
  Status Put(const std::string& name, const std::string& local_path,
             const PutOptions& options) const override {
    MM_RETURN_NOT_OK(CheckWritable());
    ObjectUploadOptions upload;
    upload.xxh3 = options.xxh3;
    upload.multipart_threshold = options.multipart_threshold;
    upload.part_size = options.part_size;
    return UploadObject(location_, name, local_path, options_, upload);
  }
  Result<RemoteFileInfo> Stat(const std::string& name) const override {
    MM_ASSIGN_OR_RETURN(ObjectInfo object, StatObject(location_, name, options_));
    return RemoteFileInfo{object.exists, object.size, object.xxh3, object.etag};
  }
  Status CheckWritable() const override {
    if (location_.scheme == "hf") {
      return Status::Unsupported(location_.text +
                                 ": hf:// sets are read here; upload to the Hub with its own "
                                 "tools (huggingface-cli upload)");
    }
    return Status::OK();
  }
  Status Remove(const std::string& name) const override {
    MM_ASSIGN_OR_RETURN(const HttpRequest request, Request(name));
    return ThreadHttpClient().Delete(request, options_);
  }

 private:
  // Errors: InvalidArgument (a name with a "." or ".." segment: location.h).
  Result<HttpRequest> Request(const std::string& name) const { return RequestFor(location_, name); }
  Location location_;
  RemoteOptions options_;
  mutable std::shared_ptr<CacheDir> cache_;  // Shard's; one SetFiles per thread (set_files.h)
  mutable CacheCounters counters_;
};

}  // namespace

int64_t RemoteBytesReceived() { return ProcessBytesReceived(); }
int64_t RemoteBytesSent() { return ProcessBytesSent(); }

Result<std::unique_ptr<SetFiles>> SetFiles::Open(const std::string& location,
                                                 const RemoteOptions& options) {
  MM_ASSIGN_OR_RETURN(Location parsed, ParseLocation(location));
  if (!parsed.remote()) return std::unique_ptr<SetFiles>(new LocalSetFiles(location));
  return std::unique_ptr<SetFiles>(new RemoteSetFiles(std::move(parsed), options));
}

}  // namespace mm::reader::internal
