// remote_file.h: input files in object stores and on web servers (s3://, gs://, http(s)://,
// hf://), read through the reader's remote layer (mm/internal/set_files.h: Signature V4, the
// AWS credential chain, retries with backoff): `mmpack build s3://bucket/laion/{00000..00099}.tar`
// streams each tar by range requests, so that memory holds one block and nothing is written to
// disk. Member data that is skipped (image bytes while the tar is first listed) is fetched only
// where it shares a block with what is read. A manifest at a URL is copied by the same range
// requests into an unnamed file of the build's spill folder (FetchRemoteFile); the images it
// names are read whole, one GET each (ReadRemoteFile).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ingest/wds.h"
#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::pack {

/// Bytes of one range request.
inline constexpr int64_t kRemoteBlockBytes = int64_t{8} << 20;

/// What the server says of the file at `url` (HTTP HEAD): whether it exists and its size and
/// ETag. Errors: InvalidArgument (a malformed URL or its settings, as ShardSet's), IOError.
struct RemoteFileStat {
  bool exists = false;
  int64_t size = -1;
  std::string etag;
};
[[nodiscard]] Result<RemoteFileStat> StatRemoteFile(const std::string& url);

/// The tar at `url` opened for reading member by member (libarchive over range requests of
/// kRemoteBlockBytes; .tar.gz and the other filters work as for local tars). A request that
/// fails after its retries ends the archive with libarchive's error, naming the URL.
/// Errors: NotFound (no such object), InvalidArgument, IOError (the first block could not be
/// read after the retries), Unsupported (the server does not serve range requests).
[[nodiscard]] Result<TarArchive> OpenRemoteTar(const std::string& url);

/// A stamp of the file at `url` for --resume's check of the input (its size and ETag, as
/// SourceStamp uses size and mtime); asked once per URL in this process. 0 when it cannot be
/// asked.
uint64_t RemoteFileStamp(const std::string& url);

/// The file at `url` copied into a new unnamed file in `dir` (OpenSpillFile, spill.h: nothing is
/// left behind) by range requests of kRemoteBlockBytes, each retried: memory holds one block.
/// The descriptor is at offset 0 of the copy. Errors: NotFound (no such object),
/// InvalidArgument (a malformed URL), IOError (naming the URL after the retries; `dir` full; the
/// object's size or ETag changed while it was read: HEAD before and after),
/// Unsupported (a file over one block on a server without range requests).
[[nodiscard]] Result<UniqueFd> FetchRemoteFile(const std::string& url,
                                               const std::filesystem::path& dir);

/// Reads the whole file at `url` into `bytes` (one GET, retried as the reader retries), at most
/// `max_bytes` (-1: no limit). `url`'s path is raw, not percent-encoded ("s3://b/img/a b.jpg",
/// "http://host/img/a b.jpg"): the remote layer encodes it. The layer's handle of the URL's
/// bucket or host (hf://: of its folder) is kept per thread, so credentials are resolved once.
/// Thread-safe. Errors: NotFound (HTTP 404), OutOfRange (over `max_bytes`), InvalidArgument (a
/// malformed URL, a "." or ".." segment), IOError (naming the URL, after the retries).
[[nodiscard]] Status ReadRemoteFile(const std::string& url, std::string* bytes, int64_t max_bytes);

}  // namespace mm::pack
