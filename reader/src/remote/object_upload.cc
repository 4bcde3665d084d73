// object_upload.cc: see object_upload.h.
#include "remote/object_upload.h"

#include <algorithm>
#include <vector>

#include "mm/internal/file.h"
#include "remote/http.h"

namespace mm::reader::internal {
namespace {

constexpr int64_t kMaxParts = 10000;
constexpr int64_t kMaxAnswerBytes = 1 << 20;

// A query value in Signature V4's canonical form (RFC 3986, '/' encoded too): libcurl 7.88
// signs the query string as it is sent, so it is sent canonical (http.h).
std::string QueryValue(const std::string& value) {
  std::string encoded = PercentEncodePath(value), out;
  for (char c : encoded) out += c == '/' ? std::string("%2F") : std::string(1, c);
  return out;
}

HttpRequest WithQuery(const HttpRequest& base, const std::string& query) {
  HttpRequest r = base;
  r.url += "?" + query;
  return r;
}

class MultipartUpload {
 public:
  MultipartUpload(const HttpRequest& object, const std::string& path, int64_t size,
                  const RemoteOptions& options, const ObjectUploadOptions& upload)
      : object_(object), path_(path), size_(size), options_(options), upload_(upload) {}

  Status Run() {
    MM_RETURN_NOT_OK(Create());
    Status st = SendParts();
    if (st.ok()) st = Complete();
    if (!st.ok()) Abort();
    return st;
  }

 private:
  Status Create() {
    HttpRequest r = WithQuery(object_, "uploads=");
    if (!upload_.xxh3.empty()) {
      r.headers.push_back(std::string(kXxh3MetadataHeader) + ": " + upload_.xxh3);
    }
    MM_ASSIGN_OR_RETURN(std::string answer,
                        ThreadHttpClient().Send(r, options_, "POST", "", kMaxAnswerBytes));
    upload_id_ = XmlElementText(answer, "UploadId");
    if (upload_id_.empty()) {
      return Status::Corruption("POST " + r.url + ": the answer holds no UploadId");
    }
    return Status::OK();
  }

  Status SendParts() {
    const int64_t part = std::max(upload_.part_size, (size_ + kMaxParts - 1) / kMaxParts);
    for (int64_t offset = 0, number = 1; offset < size_; offset += part, ++number) {
      HttpRequest r = WithQuery(
          object_, "partNumber=" + std::to_string(number) + "&uploadId=" + QueryValue(upload_id_));
      HttpResponseHead head;
      MM_RETURN_NOT_OK(ThreadHttpClient().PutFileRange(r, options_, path_, offset,
                                                       std::min(part, size_ - offset), &head));
      const std::string etag = head.Header("etag");
      if (etag.empty()) return Status::Corruption("PUT " + r.url + ": the answer has no ETag");
      etags_.push_back(etag);
    }
    return Status::OK();
  }

  Status Complete() {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i) {
      std::string etag = etags_[i];  // quoted, as S3 gives it; '"' escaped for XML
      for (size_t at = etag.find('"'); at != std::string::npos; at = etag.find('"', at + 6)) {
        etag.replace(at, 1, "&quot;");
      }
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etag +
             "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    HttpRequest r = WithQuery(object_, "uploadId=" + QueryValue(upload_id_));
    r.headers.push_back("Content-Type: application/xml");
    MM_ASSIGN_OR_RETURN(std::string answer,
                        ThreadHttpClient().Send(r, options_, "POST", xml, kMaxAnswerBytes));
    // S3 may answer 200 and report the failure in the body.
    if (answer.find("<Error>") != std::string::npos) {
      return Status::IOError("POST " + r.url + ": " + XmlElementText(answer, "Code") + ": " +
                             XmlElementText(answer, "Message"));
    }
    return Status::OK();
  }

  void Abort() {
    if (upload_id_.empty()) return;
    RemoteOptions once = options_;
    once.max_attempts = 1;
    HttpRequest r = WithQuery(object_, "uploadId=" + QueryValue(upload_id_));
    (void)ThreadHttpClient().Send(r, once, "DELETE", "", kMaxAnswerBytes);
  }

  const HttpRequest& object_;
  const std::string& path_;
  const int64_t size_;
  const RemoteOptions& options_;
  const ObjectUploadOptions& upload_;
  std::string upload_id_;
  std::vector<std::string> etags_;
};

}  // namespace

Status UploadObject(const Location& location, const std::string& name, const std::string& path,
                    const RemoteOptions& options, const ObjectUploadOptions& upload) {
  MM_ASSIGN_OR_RETURN(HttpRequest request, RequestFor(location, name));
  MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(path));
  const int64_t size = file.size;
  file.fd.Reset();
  if (location.kind == LocationKind::kS3 && upload.multipart_threshold > 0 &&
      size >= upload.multipart_threshold && size > 0) {
    return MultipartUpload(request, path, size, options, upload).Run();
  }
  if (!upload.xxh3.empty()) {
    request.headers.push_back(std::string(kXxh3MetadataHeader) + ": " + upload.xxh3);
  }
  return ThreadHttpClient().PutFile(request, options, path);
}

Result<ObjectInfo> StatObject(const Location& location, const std::string& name,
                              const RemoteOptions& options) {
  MM_ASSIGN_OR_RETURN(const HttpRequest request, RequestFor(location, name));
  Result<HttpResponseHead> head = ThreadHttpClient().Head(request, options);
  ObjectInfo info;
  if (head.status().IsNotFound()) return info;
  MM_RETURN_NOT_OK(head.status());
  info.exists = true;
  info.size = head->ContentLength();
  info.xxh3 = head->Header(kXxh3MetadataHeader);
  if (info.xxh3.empty()) info.xxh3 = head->Header(kXxh3GcsMetadataHeader);
  info.etag = head->Header("etag");
  return info;
}

}  // namespace mm::reader::internal
