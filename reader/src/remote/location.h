// location.h: where a shard set lives (a local directory, an http(s):// URL or an s3:// URL),
// how each file of the set is addressed there, and the S3 settings read from the environment
// the way AWS's own tools read them. Private to mm_reader.
//
// S3 addressing: with AWS_ENDPOINT_URL set (MinIO, Ceph, s3rver, GCS's XML API...), path style
// `ENDPOINT/BUCKET/KEY`, which every S3-compatible server accepts; without it, AWS's virtual-
// hosted style `https://BUCKET.s3.REGION.amazonaws.com/KEY` (path style when the bucket name
// holds a dot, which would break the TLS host name). Keys are percent-encoded per RFC 3986 with
// '/' kept: the URL's path is then exactly Signature V4's canonical URI for S3.
//
// Keys are not paths. A URL path's "." and ".." segments are removed by libcurl (and by
// servers) before a request is sent (RFC 3986 section 5.2.4), so "s3://bkt/x/../../other/set"
// would read, overwrite and delete bucket "other"'s objects. A location or a file name with a
// "." or ".." segment (also percent-encoded in an http(s) URL), a bucket name with characters
// outside [A-Za-z0-9._-], and an http(s) URL with a query or a fragment are refused
// (InvalidArgument) where they are parsed; http.cc also sends every path as it is
// (CURLOPT_PATH_AS_IS), so nothing that passes here is rewritten on the way.
// Thread-safe: values and pure functions (S3Settings::FromEnvironment reads getenv).
#pragma once

#include <string>

#include "mm/status.h"

namespace mm::reader::internal {

/// Credentials, region and endpoint for S3 requests, from AWS_ACCESS_KEY_ID,
/// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (else AWS_DEFAULT_REGION, else
/// us-east-1) and AWS_ENDPOINT_URL. Without an access key id, requests are sent unsigned
/// (public buckets).
struct S3Settings {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // sent as x-amz-security-token when set
  std::string region = "us-east-1";
  std::string endpoint;  // "http://127.0.0.1:9000" (no trailing '/'); empty: AWS itself
  bool signed_requests() const { return !access_key_id.empty(); }
  static S3Settings FromEnvironment();
};

enum class LocationKind { kLocal, kHttp, kS3 };

/// A parsed set location. For remote kinds, file `name` of the set is at FileUrl(name).
struct Location {
  LocationKind kind = LocationKind::kLocal;
  std::string text;      // as given, without trailing '/': the cache key and what messages say
  std::string base_url;  // kHttp and kS3: URL that file names are appended to (ends with '/')
  std::string bucket;    // kS3
  std::string prefix;    // kS3: key prefix, no leading or trailing '/' (may be empty)
  S3Settings s3;         // kS3: signing and endpoint

  bool remote() const { return kind != LocationKind::kLocal; }
  /// The URL of file `name` (a plain file name, or a path below the set) of a remote set.
  /// Errors: InvalidArgument (an empty name, a "." or ".." segment, a leading '/').
  Result<std::string> FileUrl(const std::string& name) const;
  /// "s3://bucket/prefix/name" or "https://host/dir/name" or "dir/name", for messages.
  std::string Display(const std::string& name) const;
};

/// True when `text` names a remote set (starts with s3://, http:// or https://).
bool IsRemoteLocation(const std::string& text);

/// Parses `text`: "s3://BUCKET[/PREFIX]", "http[s]://HOST[:PORT]/PATH" or a local path.
/// Errors: InvalidArgument (an empty bucket or host; a bucket name outside [A-Za-z0-9._-]; a
/// "." or ".." segment in the prefix or URL path; a query or fragment in an http(s) URL; an
/// s3:// location with an access key id but no secret, naming AWS_SECRET_ACCESS_KEY;
/// another scheme such as ftp://; a malformed AWS_ENDPOINT_URL, naming it).
Result<Location> ParseLocation(const std::string& text, const S3Settings& s3);

/// RFC 3986 percent-encoding of everything but unreserved characters and '/'.
std::string PercentEncodePath(const std::string& path);

}  // namespace mm::reader::internal
