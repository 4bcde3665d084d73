// location.h: where a shard set lives (a local directory, an http(s):// URL, an s3:// or gs://
// bucket, a Hugging Face dataset hf://datasets/...), how each file of the set is addressed
// there, and the settings each kind reads from the environment. Private to mm_reader.
//
// S3 addressing: with an endpoint set (AWS_ENDPOINT_URL or a profile's endpoint_url: MinIO,
// Ceph, s3rver...), path style `ENDPOINT/BUCKET/KEY`, which every S3-compatible server accepts;
// without it, AWS's virtual-hosted style `https://BUCKET.s3.REGION.amazonaws.com/KEY` (path
// style when the bucket name holds a dot, which would break the TLS host name). Keys are
// percent-encoded per RFC 3986 with '/' kept: the URL's path is then exactly Signature V4's
// canonical URI for S3. Credentials, region and endpoint: aws_config.h and credentials.h.
//
// gs://BUCKET/PREFIX: Google Cloud Storage through its S3-compatible XML API
// (https://storage.googleapis.com/BUCKET/KEY, path style), signed with Signature V4 (region
// "auto") with an HMAC key of a service account: GCS_ACCESS_KEY_ID and GCS_SECRET_ACCESS_KEY;
// without them, unsigned (public buckets). GCS_ENDPOINT_URL replaces the endpoint (tests: a
// loopback S3 server). The AWS variables and files are never used for gs:// (an AWS key is
// never sent to Google).
//
// hf://datasets/ORG/NAME[@REV][/PATH]: a dataset repository of the Hugging Face Hub, read through
// its resolve URLs, ENDPOINT/datasets/ORG/NAME/resolve/REV/PATH/FILE, as huggingface_hub's
// HfFileSystem reads it: REV defaults to "main" ("refs/pr/N" and "refs/convert/X" are taken
// whole; '/' in a revision is sent as %2F); ENDPOINT is HF_ENDPOINT, else https://huggingface.co;
// the token is HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH, else
// $HF_HOME/token (HF_HOME defaults to ~/.cache/huggingface), sent as a bearer token.
// Read only: uploads go through the Hub's own tools.
//
// http(s)://: MMPACK_HTTP_TOKEN, when set, is sent as a bearer token to every http(s):// set.
// A bearer token (HF's or this) goes only over https, or over http to 127.0.0.1/localhost/::1;
// another http:// URL with a token set is refused (InvalidArgument naming the variable).
//
// Keys are not paths. A URL path's "." and ".." segments are removed by libcurl (and by
// servers) before a request is sent (RFC 3986 section 5.2.4), so "s3://bkt/x/../../other/set"
// would read, overwrite and delete bucket "other"'s objects. A location or a file name with a
// "." or ".." segment (also percent-encoded in an http(s) URL), a bucket name with characters
// outside [A-Za-z0-9._-], and an http(s) URL with a query or a fragment are refused
// (InvalidArgument) where they are parsed; http.cc also sends every path as it is
// (CURLOPT_PATH_AS_IS), so nothing that passes here is rewritten on the way.
// Thread-safe: values and pure functions (the FromEnvironment functions read getenv and files).
#pragma once

#include <memory>
#include <string>

#include "mm/status.h"

namespace mm::reader::internal {

class CredentialProvider;  // credentials.h

/// Region, endpoint and credentials of S3 requests (s3:// and gs:// sets).
struct S3Settings {
  std::string region = "us-east-1";
  std::string endpoint;  // "http://127.0.0.1:9000" (no trailing '/'); empty: AWS itself
  /// Asked for keys at each request (credentials.h); null: unsigned requests.
  std::shared_ptr<CredentialProvider> credentials;
  /// A configuration problem, naming the variable or file (aws_config.h): ParseLocation fails
  /// with it for the locations these settings are for. "" when none.
  std::string error;
  /// s3://: AWS's variables and shared files (aws_config.h), the chain of credentials.h.
  static S3Settings FromEnvironment();
  /// gs://: GCS_ACCESS_KEY_ID, GCS_SECRET_ACCESS_KEY, GCS_ENDPOINT_URL (see the file comment).
  static S3Settings GcsFromEnvironment();
};

/// kS3: s3:// and gs:// (the S3 protocol); kHttp: http(s):// and hf://.
enum class LocationKind { kLocal, kHttp, kS3 };

/// A parsed set location. For remote kinds, file `name` of the set is at FileUrl(name).
struct Location {
  LocationKind kind = LocationKind::kLocal;
  std::string scheme;        // "s3", "gs", "hf", "http", "https"; "" for a local directory
  std::string text;          // as given, without trailing '/': the cache key and what messages say
  std::string base_url;      // kHttp and kS3: URL that file names are appended to (ends with '/')
  std::string bucket;        // kS3
  std::string prefix;        // kS3: key prefix, no leading or trailing '/' (may be empty)
  S3Settings s3;             // kS3: signing and endpoint
  std::string bearer_token;  // kHttp: sent as "Authorization: Bearer" (hf://, MMPACK_HTTP_TOKEN)

  bool remote() const { return kind != LocationKind::kLocal; }
  /// The URL of file `name` (a plain file name, or a path below the set) of a remote set.
  /// Errors: InvalidArgument (an empty name, a "." or ".." segment, a leading '/').
  Result<std::string> FileUrl(const std::string& name) const;
  /// "s3://bucket/prefix/name" or "https://host/dir/name" or "dir/name", for messages.
  std::string Display(const std::string& name) const;
};

/// True when `text` names a remote set (starts with s3://, gs://, hf://, http:// or https://).
bool IsRemoteLocation(const std::string& text);

/// Parses `text`: "s3://BUCKET[/PREFIX]", "gs://BUCKET[/PREFIX]", "hf://datasets/ORG/NAME[@REV]
/// [/PATH]", "http[s]://HOST[:PORT]/PATH" or a local path, with the settings of its kind read
/// from the environment (only for that kind: a local path reads nothing).
/// Errors: InvalidArgument (an empty bucket or host; a bucket name outside [A-Za-z0-9._-]; a
/// "." or ".." segment in the prefix or URL path; a query or fragment in an http(s) URL; the
/// settings' error, e.g. an access key id without a secret naming AWS_SECRET_ACCESS_KEY, or a
/// missing AWS_PROFILE; a malformed endpoint variable, naming it; an hf:// location that is not
/// a dataset; a bearer token for a plain-http URL off this machine; another scheme such as
/// ftp://).
Result<Location> ParseLocation(const std::string& text);
/// As above with the S3 settings given: they serve s3:// and gs:// locations alike (tests).
Result<Location> ParseLocation(const std::string& text, const S3Settings& s3);

/// RFC 3986 percent-encoding of everything but unreserved characters and '/'.
std::string PercentEncodePath(const std::string& path);

}  // namespace mm::reader::internal
