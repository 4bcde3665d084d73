// object_upload.h: one local file stored as an object of a remote set: a single PUT, or for an
// s3:// or gs:// set and a file of at least `multipart_threshold` bytes, S3's multipart upload
// (Amazon S3 API: CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
// AbortMultipartUpload). Private to mm_reader.
//
// Checksum: the file's XXH3-64 (16 hex digits, what index.json holds for shards) goes with the
// object as the user metadata x-amz-meta-mmpack-xxh3 (on the PUT, or on the
// CreateMultipartUpload for a multipart object), so that `mmpack upload` can tell an object it
// already stored by a HEAD (StatObject): the ETag cannot serve, being the MD5 of the bytes only
// for single-part uploads without SSE-KMS (a multipart ETag is an MD5 of part MD5s that depends
// on the part size; GCS's composite objects have none).
//
// Multipart: parts of `part_size` bytes (raised to size / 10,000 when the file would need more
// parts than S3's 10,000; S3's minimum part is 5 MiB, the last excepted), sent one after the
// other by the caller's thread, each a request of its own with HttpClient's retries: a failed
// part is sent again alone, not the whole file. A part's SHA-256 signs it. After a part fails
// for good, the upload is aborted (DELETE ?uploadId; its failure is not reported over the
// part's). An upload cut short (the process killed) leaves its parts at the server until a
// bucket lifecycle rule (AbortIncompleteMultipartUpload) removes them; the object itself does
// not exist until CompleteMultipartUpload, so a reader never sees half of it.
//
// Thread-safe: each call uses the calling thread's client (ThreadHttpClient).
#pragma once

#include <cstdint>
#include <string>

#include "mm/reader.h"
#include "mm/status.h"
#include "remote/location.h"

namespace mm::reader::internal {

/// The user metadata header that holds a file's XXH3-64.
inline constexpr const char kXxh3MetadataHeader[] = "x-amz-meta-mmpack-xxh3";
/// The same metadata as GCS's XML API answers it: it takes x-amz-meta-* on a PUT and returns
/// the object's custom metadata as x-goog-meta-* (GCS "XML API headers": x-goog-meta-).
inline constexpr const char kXxh3GcsMetadataHeader[] = "x-goog-meta-mmpack-xxh3";

struct ObjectUploadOptions {
  std::string xxh3;                                 // "" : no checksum metadata
  int64_t multipart_threshold = int64_t{64} << 20;  // bytes; S3 kinds only
  int64_t part_size = int64_t{16} << 20;            // bytes
};

/// What a HEAD says of an object.
struct ObjectInfo {
  bool exists = false;
  int64_t size = -1;  // Content-Length, -1 when not given
  std::string xxh3;   // kXxh3MetadataHeader (else kXxh3GcsMetadataHeader), "" when absent
  std::string etag;
};

/// Stores the regular file `path` as file `name` of the set at `location`.
/// Errors: IOError naming the URL and the request ("PUT URL?partNumber=2&uploadId=...: HTTP 503
/// ... (5 tries over 3.1 s)"), IOError reading the file, Corruption (an S3 answer without the
/// upload id or a part's ETag), InvalidArgument (a name with a dot segment).
Status UploadObject(const Location& location, const std::string& name, const std::string& path,
                    const RemoteOptions& options, const ObjectUploadOptions& upload);

/// HEAD of file `name` of the set at `location`; a missing object is exists = false.
/// Errors: those of HttpClient::Head but NotFound.
Result<ObjectInfo> StatObject(const Location& location, const std::string& name,
                              const RemoteOptions& options);

}  // namespace mm::reader::internal
