// http.cc: see http.h.
#include "remote/http.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/version.h"
#include "remote/credentials.h"

namespace mm::reader::internal {
namespace {

constexpr size_t kMaxErrorBody = 4096;  // bytes of an error response kept for the message
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// ProcessBytesReceived / ProcessBytesSent.
std::atomic<int64_t> g_received{0}, g_sent{0};

// libcurl's global state, initialised once before the first handle (curl_global_init is not
// thread-safe; a function-local static is).
bool CurlReady() {
  static const bool ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ready;
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

// "HTTP 403 (InvalidAccessKeyId: The AWS Access Key Id you provided does not exist...)".
std::string DescribeHttp(long code, const std::string& body) {
  std::string out = "HTTP " + std::to_string(code);
  const std::string s3_code = XmlElementText(body, "Code"),
                    message = XmlElementText(body, "Message");
  if (!s3_code.empty()) out += " (" + s3_code + (message.empty() ? "" : ": " + message) + ")";
  return out;
}

bool RetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return true;
    default:
      return false;
  }
}

bool RetryableHttpCode(long code) { return code >= 500 || code == 408 || code == 429; }

// A host that names this machine: a bearer token may go there over plain http.
bool IsLoopbackUrl(const std::string& url) {
  for (const char* prefix : {"http://127.", "http://localhost:", "http://localhost/",
                             "http://[::1]:", "http://[::1]/"}) {
    if (url.compare(0, std::strlen(prefix), prefix) == 0) return true;
  }
  return url == "http://localhost" || url == "http://[::1]";
}

}  // namespace

Result<HttpRequest> RequestFor(const Location& location, const std::string& name) {
  HttpRequest request;
  MM_ASSIGN_OR_RETURN(request.url, location.FileUrl(name));
  request.s3 = location.kind == LocationKind::kS3 ? &location.s3 : nullptr;
  request.bearer_token = location.bearer_token;
  return request;
}

std::string XmlElementText(const std::string& xml, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = xml.find(open);
  if (b == std::string::npos) return "";
  const size_t e = xml.find(close, b + open.size());
  if (e == std::string::npos) return "";
  return xml.substr(b + open.size(), e - b - open.size());
}

std::string HttpResponseHead::Header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

int64_t HttpResponseHead::ContentLength() const {
  const std::string v = Header("content-length");
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  return !v.empty() && *end == '\0' && n >= 0 ? static_cast<int64_t>(n) : -1;
}

int64_t ProcessBytesReceived() { return g_received.load(std::memory_order_relaxed); }
int64_t ProcessBytesSent() { return g_sent.load(std::memory_order_relaxed); }

// One request and what its current try has seen.
struct HttpClient::Transfer {
  const char* method = "GET";
  const HttpRequest* request = nullptr;
  DownloadSink* sink = nullptr;  // GET
  int64_t max_bytes = -1;
  // The body sent: a file's range (upload_fd, from upload_offset) or `upload_memory`.
  bool has_body = false;
  std::string upload_path;
  UniqueFd upload_fd;
  int64_t upload_offset = 0;
  const std::string* upload_memory = nullptr;
  int64_t upload_size = 0;
  std::string payload_sha256 = kEmptySha256;
  HttpResponseHead* head = nullptr;  // the caller's, filled by the last try
  // The current try.
  CURL* curl = nullptr;
  long http_code = 0;
  bool status_checked = false;
  std::string error_body;
  Status sink_status;
  int64_t received = 0;
  int64_t sent = 0;       // of the body, this try
  int64_t expected = -1;  // Content-Length, -1 when unknown
  HttpResponseHead response;
  HttpClient* client = nullptr;
};

namespace {

// The status line is known when the first body byte arrives; a 2xx body goes to the sink, any
// other body is kept (bounded) for the error message.
size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<HttpClient::Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->status_checked) {
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->http_code);
    curl_off_t length = -1;
    curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    t->expected = length;
    t->status_checked = true;
  }
  if (t->http_code < 200 || t->http_code >= 300) {
    t->error_body.append(
        data, std::min(bytes, kMaxErrorBody - std::min(kMaxErrorBody, t->error_body.size())));
    return bytes;
  }
  if (t->max_bytes >= 0 &&
      (t->received + static_cast<int64_t>(bytes) > t->max_bytes || t->expected > t->max_bytes)) {
    t->sink_status = Status::OutOfRange("the response is over the " + std::to_string(t->max_bytes) +
                                        " bytes read of it");
    return 0;
  }
  if (t->sink) {
    t->sink_status = t->sink->Write(data, bytes);
    if (!t->sink_status.ok()) return 0;
  }
  t->received += static_cast<int64_t>(bytes);
  g_received.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  return bytes;
}

size_t OnUpload(char* buffer, size_t size, size_t n, void* user) {
  auto* t = static_cast<HttpClient::Transfer*>(user);
  const size_t want = static_cast<size_t>(
      std::min<int64_t>(static_cast<int64_t>(size * n), t->upload_size - t->sent));
  if (want == 0) return 0;
  if (t->upload_memory) {
    std::memcpy(buffer, t->upload_memory->data() + t->sent, want);
    t->sent += static_cast<int64_t>(want);
    g_sent.fetch_add(static_cast<int64_t>(want), std::memory_order_relaxed);
    return want;
  }
  for (;;) {
    const ssize_t got = ::pread(t->upload_fd.get(), buffer, want, t->upload_offset + t->sent);
    if (got > 0) {
      t->sent += got;
      g_sent.fetch_add(got, std::memory_order_relaxed);
      return static_cast<size_t>(got);
    }
    if (got == 0) {
      t->sink_status = Status::IOError(t->upload_path + " became shorter while it was sent");
      return CURL_READFUNC_ABORT;
    }
    if (errno != EINTR) {
      t->sink_status = ErrnoStatus(errno, "cannot read " + t->upload_path);
      return CURL_READFUNC_ABORT;
    }
  }
}

// Each response header line: kept (lowercased name) in the try's HttpResponseHead. A header
// block of a redirect or of "100 Continue" starts the map over.
size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<HttpClient::Transfer*>(user);
  const size_t bytes = size * n;
  std::string line(data, bytes);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.compare(0, 5, "HTTP/") == 0) {
    t->response.headers.clear();
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return bytes;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t b = colon + 1;
  while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
  t->response.headers[name] = line.substr(b);
  return bytes;
}

}  // namespace

HttpClient::HttpClient() { (void)EnsureHandle(); }

HttpClient::~HttpClient() {
  // Another process's handle (inherited through fork) is left alone: see http.h.
  if (curl_ && pid_ == ::getpid()) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Status HttpClient::EnsureHandle() {
  const int pid = static_cast<int>(::getpid());
  if (curl_ && pid_ == pid) return Status::OK();
  curl_ = nullptr;  // a parent's handle, inherited: abandoned, never cleaned up here
  if (CurlReady()) curl_ = curl_easy_init();
  pid_ = pid;
  if (!curl_) return Status::Internal("libcurl could not be initialised");
  return Status::OK();
}

HttpClient& ThreadHttpClient() {
  thread_local HttpClient client;
  return client;
}

namespace {

// Forgets what an earlier try of `t` saw, before a new one on `curl`.
void StartTry(HttpClient::Transfer* t, CURL* curl) {
  t->curl = curl;
  t->http_code = 0;
  t->status_checked = false;
  t->error_body.clear();
  t->sink_status = Status::OK();
  t->received = 0;
  g_sent.fetch_sub(t->sent, std::memory_order_relaxed);  // a retry sends the body again
  t->sent = 0;
  t->expected = -1;
  t->response = HttpResponseHead();
}

// The transfer's URL, limits, callbacks and method; `error` receives libcurl's message.
void SetTransferOptions(CURL* curl, HttpClient::Transfer* t, const RemoteOptions& options,
                        char* error) {
  const HttpRequest& r = *t->request;
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // Keys are not paths: send the path as it is, never with dot segments resolved away
  // (location.h refuses them before this; this keeps anything else from being rewritten).
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, ("mmpack/" + std::string(kVersion)).c_str());
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options.connect_timeout_s));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout_s));
  if (r.timeout_ms > 0) {
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.timeout_ms));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_ms));
  }
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
  const std::string method = t->method;
  if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(t->upload_size));
  } else if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->upload_size));
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (t->has_body) {
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, &OnUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, t);
  }
}

// The request's headers (S3's payload hash and session token among them), set on `curl`;
// the list must outlive the transfer.
SlistPtr SetHeaders(CURL* curl, const HttpClient::Transfer& t, const AwsCredentials* keys) {
  const HttpRequest& r = *t.request;
  curl_slist* raw = curl_slist_append(nullptr, "Expect:");  // no 100-continue round trip
  SlistPtr headers(raw);
  for (const std::string& h : r.headers) curl_slist_append(raw, h.c_str());
  if (r.s3) {
    curl_slist_append(raw, ("x-amz-content-sha256: " + t.payload_sha256).c_str());
    if (keys && !keys->session_token.empty()) {
      curl_slist_append(raw, ("x-amz-security-token: " + keys->session_token).c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, raw);
  return headers;
}

// SigV4 with `keys` (then no redirect is followed), else redirects; a bearer token only over
// https or to loopback. `sigv4` holds the signing scope for the transfer's lifetime.
// Errors: InvalidArgument (a bearer token for plain http elsewhere).
Status SetAuthentication(CURL* curl, const HttpClient::Transfer& t, const AwsCredentials* keys,
                         std::string* sigv4) {
  const HttpRequest& r = *t.request;
  if (keys) {
    *sigv4 = "aws:amz:" + r.s3->region + ":s3";
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4->c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, keys->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, keys->secret_access_key.c_str());
  } else {
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);  // a signature would not survive it
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  }
  if (!r.bearer_token.empty()) {
    if (r.url.compare(0, 8, "https://") != 0 && !IsLoopbackUrl(r.url)) {
      return Status::InvalidArgument(std::string(t.method) + " " + r.url +
                                     ": a bearer token is sent only over https (or to this "
                                     "machine's loopback address)");
    }
    // Never sent to another host a redirect leads to (libcurl keeps authentication to the
    // first host: a Hub download is redirected to a CDN URL that is signed itself).
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, r.bearer_token.c_str());
  }
  return Status::OK();
}

// What a finished try of `t` means: OK for a 2xx, else the error (its bytes no longer counted
// as received). Sets *retry when a later try may succeed.
Status TryOutcome(const HttpClient::Transfer& t, CURLcode code, const char* error, bool* retry) {
  const std::string where = std::string(t.method) + " " + t.request->url + ": ";
  if (!t.sink_status.ok())
    return t.sink_status.WithContext(std::string(t.method) + " " + t.request->url);
  if (code != CURLE_OK) {
    *retry = RetryableCurlCode(code);
    std::string what = error[0] ? error : curl_easy_strerror(code);
    if (code == CURLE_PARTIAL_FILE || (code == CURLE_RECV_ERROR && t.expected > 0)) {
      what = "connection closed after " + std::to_string(t.received) + " of " +
             std::to_string(t.expected) + " bytes (" + what + ")";
    }
    g_received.fetch_sub(t.received, std::memory_order_relaxed);
    return Status::IOError(where + what);
  }
  if (t.http_code >= 200 && t.http_code < 300) return Status::OK();
  g_received.fetch_sub(t.received, std::memory_order_relaxed);
  const std::string http = DescribeHttp(t.http_code, t.error_body);
  if (t.http_code == 404) return Status::NotFound(where + http);
  *retry = RetryableHttpCode(t.http_code);
  return Status::IOError(where + http);
}

}  // namespace

// One try of `t`. Sets *retry when a later try may succeed.
Status HttpClient::Attempt(Transfer* t, const RemoteOptions& options, bool* retry) {
  *retry = false;
  const HttpRequest& r = *t->request;
  // Asked at each try: temporary credentials may have been refreshed since the last one.
  std::shared_ptr<const AwsCredentials> keys;
  if (r.s3 && r.s3->credentials) {
    Result<std::shared_ptr<const AwsCredentials>> got = r.s3->credentials->Get();
    if (!got.ok()) return got.status().WithContext(std::string(t->method) + " " + r.url);
    keys = std::move(*got);
  }
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // keeps the connection cache: keep-alive across requests
  StartTry(t, curl);
  if (t->sink) MM_RETURN_NOT_OK(t->sink->Begin());
  char error[CURL_ERROR_SIZE] = "";
  SetTransferOptions(curl, t, options, error);
  const SlistPtr headers = SetHeaders(curl, *t, keys.get());
  std::string sigv4;
  MM_RETURN_NOT_OK(SetAuthentication(curl, *t, keys.get(), &sigv4));
  const CURLcode code = curl_easy_perform(curl);
  bytes_received_ += t->received;
  if (!t->status_checked) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t->http_code);
  t->response.status = t->http_code;
  if (t->head) *t->head = t->response;
  return TryOutcome(*t, code, error, retry);
}

Status HttpClient::Perform(Transfer* t, const RemoteOptions& options) {
  MM_RETURN_NOT_OK(EnsureHandle());  // after a fork: this process's own connection
  t->client = this;
  const auto begin = std::chrono::steady_clock::now();
  thread_local std::minstd_rand jitter(std::random_device{}());
  const int tries = std::max(1, options.max_attempts);
  Status last;
  for (int attempt = 1; attempt <= tries; ++attempt) {
    bool retry = false;
    last = Attempt(t, options, &retry);
    if (last.ok() || !retry) return last;
    if (attempt == tries) break;
    const double cap =
        std::min<double>(options.max_backoff_ms,
                         options.initial_backoff_ms * double(1 << std::min(attempt - 1, 20)));
    std::uniform_real_distribution<double> half_to_full(cap / 2, cap);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(half_to_full(jitter)));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  char took[64];
  std::snprintf(took, sizeof took, " (%d tries over %.1f s)", tries, seconds);
  return Status(last.code(), last.message() + took);
}

Status HttpClient::Get(const HttpRequest& request, const RemoteOptions& options, DownloadSink* sink,
                       int64_t max_bytes) {
  Transfer t;
  t.method = "GET";
  t.request = &request;
  t.sink = sink;
  t.max_bytes = max_bytes;
  return Perform(&t, options);
}

namespace {

// A response body kept in memory (GetText, Send: small answers under a max_bytes).
struct StringSink final : DownloadSink {
  std::string text;
  Status Begin() override {
    text.clear();
    return Status::OK();
  }
  Status Write(const char* data, size_t size) override {
    text.append(data, size);
    return Status::OK();
  }
};

}  // namespace

Result<std::string> HttpClient::GetText(const HttpRequest& request, const RemoteOptions& options,
                                        int64_t max_bytes) {
  StringSink sink;
  MM_RETURN_NOT_OK(Get(request, options, &sink, max_bytes));
  return std::move(sink.text);
}

Status HttpClient::PutFile(const HttpRequest& request, const RemoteOptions& options,
                           const std::string& path, HttpResponseHead* head) {
  return PutFileRange(request, options, path, 0, -1, head);
}

Status HttpClient::PutFileRange(const HttpRequest& request, const RemoteOptions& options,
                                const std::string& path, int64_t offset, int64_t size,
                                HttpResponseHead* head) {
  Transfer t;
  t.method = "PUT";
  t.request = &request;
  t.head = head;
  t.has_body = true;
  t.upload_path = path;
  MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(path));
  t.upload_fd = std::move(file.fd);
  t.upload_offset = offset;
  t.upload_size = size < 0 ? file.size - offset : size;
  if (offset < 0 || t.upload_size < 0 || offset + t.upload_size > file.size) {
    return Status::InvalidArgument(path + ": bytes " + std::to_string(offset) + ".." +
                                   std::to_string(offset + t.upload_size) + " of a file of " +
                                   std::to_string(file.size));
  }
  if (request.s3) {
    MM_ASSIGN_OR_RETURN(t.payload_sha256, Sha256HexOfFileRange(path, offset, t.upload_size));
  }
  Status st = Perform(&t, options);
  if (!st.ok()) g_sent.fetch_sub(t.sent, std::memory_order_relaxed);
  return st;
}

Result<std::string> HttpClient::Send(const HttpRequest& request, const RemoteOptions& options,
                                     const std::string& method, const std::string& body,
                                     int64_t max_bytes, HttpResponseHead* head) {
  StringSink sink;
  Transfer t;
  t.method = method.c_str();
  t.request = &request;
  t.head = head;
  t.sink = &sink;
  t.max_bytes = max_bytes;
  t.has_body = method == "PUT" || method == "POST";
  t.upload_memory = &body;
  t.upload_size = static_cast<int64_t>(body.size());
  if (request.s3) t.payload_sha256 = Sha256Hex(body);
  Status st = Perform(&t, options);
  if (!st.ok()) {
    g_sent.fetch_sub(t.sent, std::memory_order_relaxed);
    return st;
  }
  return std::move(sink.text);
}

Result<HttpResponseHead> HttpClient::Head(const HttpRequest& request,
                                          const RemoteOptions& options) {
  Transfer t;
  t.method = "HEAD";
  t.request = &request;
  HttpResponseHead head;
  t.head = &head;
  MM_RETURN_NOT_OK(Perform(&t, options));
  return head;
}

Result<bool> HttpClient::Exists(const HttpRequest& request, const RemoteOptions& options) {
  Transfer t;
  t.method = "HEAD";
  t.request = &request;
  Status st = Perform(&t, options);
  if (st.IsNotFound()) return false;
  MM_RETURN_NOT_OK(st);
  return true;
}

Status HttpClient::Delete(const HttpRequest& request, const RemoteOptions& options) {
  Transfer t;
  t.method = "DELETE";
  t.request = &request;
  Status st = Perform(&t, options);
  return st.IsNotFound() ? Status::OK() : st;
}

}  // namespace mm::reader::internal
