// remote_file.h: input files in object stores and on web servers (s3://, gs://, http(s)://,
// hf://), read through the reader's remote layer (mm/internal/set_files.h: Signature V4, the
// AWS credential chain, retries with backoff): `mmpack build s3://bucket/laion/{00000..00099}.tar`
// streams each tar by range requests, so that memory holds one block and nothing is written to
// disk. Member data that is skipped (image bytes while the tar is first listed) is fetched only
// where it shares a block with what is read.
#pragma once

#include <cstdint>
#include <string>

#include "ingest/wds.h"
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

}  // namespace mm::pack
