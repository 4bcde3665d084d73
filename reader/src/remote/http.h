// http.h: HTTP(S) requests of remote shard sets through libcurl, with retries; S3 requests
// signed with AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4). The one place libcurl's
// error convention (CURLcode, HTTP status, S3's XML error body) becomes a Status.
//
// Retries: a timeout, a connection error (refused, reset, closed before the body's end), HTTP
// 5xx, 408 and 429 are retried, up to RemoteOptions::max_attempts tries, sleeping
// initial_backoff_ms * 2^k (at most max_backoff_ms; uniformly jittered down to half) between
// them; a download starts over (DownloadSink::Begin). Anything else (404, 403, another 4xx, a
// sink that fails) ends at once. The final error names the method, the URL, what happened on the
// last try and how many tries took how long, e.g.
//   IOError: GET http://127.0.0.1:9/b/shard-000001.h5: connection closed after 1048576 of
//   4194304 bytes (5 tries over 3.1 s)
// A stalled transfer (below 1 KiB/s for stall_timeout_s) counts as a timeout.
//
// S3: x-amz-content-sha256 is always sent (the SHA-256 of an empty body for GET, HEAD and
// DELETE; of the file for PUT) and x-amz-security-token when a session token is set; libcurl
// signs them with the host and x-amz-date. The keys are asked of S3Settings::credentials at
// each try, so a retry after temporary credentials were refreshed signs with the new ones.
// Only S3's multipart requests carry a query string, written in Signature V4's canonical form
// (names sorted, values percent-encoded, "uploads=") because libcurl 7.88 signs the query as
// it is sent (object_upload.cc).
//
// Thread safety: an HttpClient is one libcurl easy handle (reused: keep-alive) and is used by
// one thread at a time; ThreadHttpClient() gives each thread its own.
//
// Fork: a client remembers the process that made its handle. Used in another one (a forked
// child: a DataLoader worker), it abandons the inherited handle without closing it (closing
// could send on the connection that the parent still uses: a TLS close_notify, a half-read
// response) and opens a fresh one, so parent and child never share a connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"
#include "remote/location.h"

namespace mm::reader::internal {

/// One request: its URL and, for S3, the settings that sign it.
struct HttpRequest {
  std::string url;
  const S3Settings* s3 = nullptr;  // non-null: an S3 request, signed when it has credentials
  /// Sent as "Authorization: Bearer TOKEN" (libcurl's CURLAUTH_BEARER: never to another host
  /// a redirect leads to). Location::bearer_token: only over https or to a loopback host.
  std::string bearer_token;
  std::vector<std::string> headers;  // more request headers, "Name: value"
  /// The whole request's limit in milliseconds, connecting included; 0: RemoteOptions' connect
  /// and stall timeouts only (the instance metadata service's short timeouts).
  int timeout_ms = 0;
};

/// What a response said besides its body: the status and the headers (names lowercased).
struct HttpResponseHead {
  long status = 0;
  std::map<std::string, std::string> headers;
  /// A header's value, or "" when absent.
  std::string Header(const std::string& lowercase_name) const;
  /// Content-Length, -1 when absent.
  int64_t ContentLength() const;
};

/// The request for file `name` of the remote set `location` (its URL, S3 settings or bearer
/// token). `location` must outlive the request. Errors: those of Location::FileUrl.
Result<HttpRequest> RequestFor(const Location& location, const std::string& name);

/// The text of the first <Tag>...</Tag> of an XML document (S3's and STS's answers), "" when
/// absent. Not an XML parser: enough for those answers, whose values hold no markup.
std::string XmlElementText(const std::string& xml, const std::string& tag);

/// Receives a download's body. Begin() comes before each try: a retry starts over.
class DownloadSink {
 public:
  virtual ~DownloadSink() = default;
  virtual Status Begin() = 0;
  virtual Status Write(const char* data, size_t size) = 0;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// GETs request.url into `sink`, at most `max_bytes` bytes of body (-1: no limit).
  /// Errors: NotFound (HTTP 404: "GET URL: HTTP 404 (NoSuchKey: The specified key does not
  /// exist.)"), IOError (403 and other refusals, with S3's error code; retries exhausted),
  /// OutOfRange (a body over max_bytes), the sink's own Status.
  Status Get(const HttpRequest& request, const RemoteOptions& options, DownloadSink* sink,
             int64_t max_bytes = -1);
  /// GET of a small document (index.json, a mixture spec), at most `max_bytes`.
  Result<std::string> GetText(const HttpRequest& request, const RemoteOptions& options,
                              int64_t max_bytes);
  /// PUTs the regular file `path` as request.url's body. S3: signed with the file's SHA-256.
  /// `head`, when given, receives the response's status and headers (an S3 ETag).
  /// Errors as Get; IOError reading the file.
  Status PutFile(const HttpRequest& request, const RemoteOptions& options, const std::string& path,
                 HttpResponseHead* head = nullptr);
  /// PUTs `size` bytes of `path` from byte `offset` (a part of a multipart upload), as PutFile.
  Status PutFileRange(const HttpRequest& request, const RemoteOptions& options,
                      const std::string& path, int64_t offset, int64_t size,
                      HttpResponseHead* head = nullptr);
  /// Sends `method` (GET, PUT, POST, DELETE) with `body` and returns the 2xx response's body, at
  /// most `max_bytes` (small documents: STS, the instance metadata, S3's multipart answers).
  /// Errors as Get.
  Result<std::string> Send(const HttpRequest& request, const RemoteOptions& options,
                           const std::string& method, const std::string& body, int64_t max_bytes,
                           HttpResponseHead* head = nullptr);
  /// HEAD: true for 2xx, false for 404. Errors as Get.
  Result<bool> Exists(const HttpRequest& request, const RemoteOptions& options);
  /// HEAD: the 2xx response's status and headers. Errors as Get (NotFound for 404).
  Result<HttpResponseHead> Head(const HttpRequest& request, const RemoteOptions& options);
  /// DELETE; a missing object is not an error (S3 answers 204 either way).
  Status Delete(const HttpRequest& request, const RemoteOptions& options);

  /// Body bytes received by this client (all tries, all requests).
  int64_t bytes_received() const { return bytes_received_; }

  struct Transfer;  // one request's state (http.cc)

 private:
  Status Perform(Transfer* transfer, const RemoteOptions& options);
  Status Attempt(Transfer* transfer, const RemoteOptions& options, bool* retry);
  // A handle of this process (a new one after a fork). Errors: Internal (curl_easy_init).
  Status EnsureHandle();
  void* curl_ = nullptr;  // CURL*, owned by process pid_ (curl_easy_cleanup in its destructor)
  int pid_ = 0;           // the process that made curl_
  int64_t bytes_received_ = 0;
};

/// This thread's client (created on first use, freed at thread exit).
HttpClient& ThreadHttpClient();

/// Body bytes that every client of this process has received and sent, counting only the try
/// that is under way or succeeded of each request (a retried try's bytes are taken back): what
/// progress lines count. Monotonic but for those retries.
int64_t ProcessBytesReceived();
int64_t ProcessBytesSent();

}  // namespace mm::reader::internal
