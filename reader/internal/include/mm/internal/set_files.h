// set_files.h: the files of one shard set, wherever it lives (a local directory, s3://,
// http(s)://), for the mmpack commands that read a set's files themselves rather than its
// samples (`mmpack info`, `mmpack verify`). Remote files come through the reader's transport
// (reader/src/remote/http.h: Signature V4, retries) and shards through its cache
// (reader/src/remote/cache.h: checked against index.json's size and XXH3-64, bounded, shared).
// A remote set can also be written, file by file (`mmpack upload`): Stat, Put and Remove.
// Thread safety: one SetFiles per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::reader::internal {

/// A local file of a shard: `path` stays valid (a remote shard's cached copy stays pinned, so
/// the cache never evicts it) while `hold` lives.
struct LocalShardFile {
  std::string path;
  std::shared_ptr<const void> hold;  // null for a local set
};

/// What a remote set's file is at the server (SetFiles::Stat).
struct RemoteFileInfo {
  bool exists = false;
  int64_t size = -1;  // bytes; -1 when the server did not say
  std::string xxh3;   // the XXH3-64 stored with the object by Put (16 hex digits); "" if none
  std::string etag;
};

/// How Put stores a file (reader/src/remote/object_upload.h).
struct PutOptions {
  std::string xxh3;  // the file's XXH3-64, kept with the object as x-amz-meta-mmpack-xxh3
  /// s3:// and gs://: files of at least this many bytes go up in parts (S3 multipart upload),
  /// `part_size` bytes each; each part is retried alone. 0: always one PUT.
  int64_t multipart_threshold = int64_t{64} << 20;
  int64_t part_size = int64_t{16} << 20;
};

/// Body bytes this process has received from and sent to remote sets, a failed try's bytes
/// taken back (reader/src/remote/http.h): what progress lines count.
int64_t RemoteBytesReceived();
int64_t RemoteBytesSent();

class SetFiles {
 public:
  /// The files of the set at `location`; nothing is read yet.
  /// Errors: InvalidArgument (a malformed location, as ShardSet::Open says). The cache
  /// directory is made at the first Shard() (`mmpack upload` and a build streaming tars never
  /// need one).
  static Result<std::unique_ptr<SetFiles>> Open(const std::string& location,
                                                const RemoteOptions& options);
  virtual ~SetFiles() = default;

  virtual bool remote() const = 0;
  /// The set's location as given (no trailing '/'): what index.json's root is.
  virtual const std::string& root() const = 0;
  /// "s3://bucket/prefix/index.json", "dir/index.json": file `name` for messages.
  virtual std::string Display(const std::string& name) const = 0;
  /// The bytes of the set's file `name` (index.json, tokenizer.model, report.json), at most
  /// `max_bytes`. Errors: NotFound (no such file; HTTP 404), IOError (naming the file or URL),
  /// OutOfRange (larger than max_bytes).
  virtual Result<std::string> Read(const std::string& name, int64_t max_bytes) const = 0;
  /// Bytes [offset, offset + size) of the set's file `name` (an HTTP range request, retried as
  /// downloads are; fewer at the file's end, none past it): `mmpack build` streams tars this
  /// way. Errors: NotFound, IOError (naming the file or URL), Unsupported (a server that
  /// answers a range request with the whole file), InvalidArgument (a negative offset or size).
  virtual Result<std::string> ReadRange(const std::string& name, int64_t offset,
                                        int64_t size) const = 0;
  /// Whether the set has a file `name` (a local directory entry of any type, or HTTP 2xx).
  virtual Result<bool> Exists(const std::string& name) const = 0;
  /// A local file holding shard `entry` (of this set's index.json). A remote shard is
  /// downloaded into the cache unless there already, checked against entry's size and
  /// XXH3-64. Errors: IOError (the cache directory cannot be created), those of the cache and
  /// the download (Corruption for a checksum that
  /// differs twice; IOError naming the URL after the retries); none for a local set (the
  /// caller checks the file).
  virtual Result<LocalShardFile> Shard(const ShardEntry& entry) const = 0;
  /// Uploads the local regular file `local_path` as the set's file `name` (HTTP PUT, or S3's
  /// multipart upload for large files: PutOptions; S3: signed with the body's SHA-256), retried
  /// as downloads are. Errors: IOError naming the URL after the last try ("PUT URL: HTTP 503
  /// (...) (5 tries over 3.1 s)") or reading the file; Unsupported for a local set (mmpack
  /// writes local sets itself) and an hf:// set (CheckWritable).
  virtual Status Put(const std::string& name, const std::string& local_path,
                     const PutOptions& options = PutOptions()) const = 0;
  /// What the server has as file `name` (HTTP HEAD). Errors: as Exists; Unsupported for a
  /// local set.
  virtual Result<RemoteFileInfo> Stat(const std::string& name) const = 0;
  /// OK when Put can store files here. Errors: Unsupported (a local set; an hf:// set, which
  /// the Hub's own tools upload).
  virtual Status CheckWritable() const = 0;
  /// Deletes the set's file `name`; a missing file is not an error. Errors as Put.
  virtual Status Remove(const std::string& name) const = 0;
};

}  // namespace mm::reader::internal
