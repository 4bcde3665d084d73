// location.cc: see location.h.
#include "remote/location.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "mm/internal/file.h"
#include "remote/aws_config.h"
#include "remote/credentials.h"

namespace mm::reader::internal {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string StripSlashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  size_t b = 0;
  while (b < s.size() && s[b] == '/') ++b;
  return s.substr(b);
}

// "http://host[:port][/...]": the scheme and a non-empty host, nothing else checked.
bool LooksLikeHttpUrl(const std::string& url) {
  for (const char* scheme : {"http://", "https://"}) {
    if (StartsWith(url, scheme)) {
      const size_t host = std::string(scheme).size();
      return url.size() > host && url[host] != '/';
    }
  }
  return false;
}

// A segment of a URL path that names "." or "..": literally, or percent-encoded (%2e) when
// `encoded` (an http(s) URL, which servers decode before they normalise).
bool IsDotSegment(std::string segment, bool encoded) {
  if (encoded) {
    std::string decoded;
    for (size_t i = 0; i < segment.size(); ++i) {
      if (segment[i] == '%' && i + 2 < segment.size() && segment[i + 1] == '2' &&
          (segment[i + 2] == 'e' || segment[i + 2] == 'E')) {
        decoded.push_back('.');
        i += 2;
      } else {
        decoded.push_back(segment[i]);
      }
    }
    segment = decoded;
  }
  return segment == "." || segment == "..";
}

// InvalidArgument when `path` (segments split at '/') holds a "." or ".." segment.
Status CheckNoDotSegments(const std::string& path, bool encoded, const std::string& what) {
  size_t begin = 0;
  for (;;) {
    const size_t slash = path.find('/', begin);
    const std::string segment =
        path.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
    if (IsDotSegment(segment, encoded)) {
      return Status::InvalidArgument(
          what + ": a '" + segment +
          "' path segment (object keys are not paths: it would be resolved away and name "
          "another key, prefix or bucket)");
    }
    if (slash == std::string::npos) return Status::OK();
    begin = slash + 1;
  }
}

// S3 bucket names (AWS's rules, legacy ones included: letters of either case, digits, '.',
// '-', '_'); "." and ".." are not names.
bool ValidBucket(const std::string& bucket) {
  if (bucket.empty() || bucket == "." || bucket == "..") return false;
  for (unsigned char c : bucket) {
    if (!std::isalnum(c) && c != '.' && c != '-' && c != '_') return false;
  }
  return true;
}

// "s3://BUCKET[/PREFIX]" or "gs://BUCKET[/PREFIX]" (`scheme` "s3" or "gs").
Result<Location> ParseBucket(const std::string& text, const std::string& scheme,
                             const S3Settings& s3) {
  const std::string head = scheme + "://";
  std::string rest = text.substr(head.size());
  const size_t slash = rest.find('/');
  Location loc;
  loc.kind = LocationKind::kS3;
  loc.scheme = scheme;
  loc.bucket = rest.substr(0, slash);
  loc.prefix = slash == std::string::npos ? "" : StripSlashes(rest.substr(slash));
  loc.s3 = s3;
  if (loc.bucket.empty()) return Status::InvalidArgument(text + ": no bucket after " + head);
  if (!ValidBucket(loc.bucket)) {
    return Status::InvalidArgument(text + ": bucket name '" + loc.bucket +
                                   "' is not letters, digits, '.', '-' and '_'");
  }
  MM_RETURN_NOT_OK(CheckNoDotSegments(loc.prefix, /*encoded=*/false, text));
  if (!s3.error.empty()) return Status::InvalidArgument(text + ": " + s3.error);
  loc.text = head + loc.bucket + (loc.prefix.empty() ? "" : "/" + loc.prefix);
  std::string root;
  if (!s3.endpoint.empty()) {
    if (!LooksLikeHttpUrl(s3.endpoint)) {
      return Status::InvalidArgument(
          std::string(scheme == "gs" ? "GCS_ENDPOINT_URL" : "AWS_ENDPOINT_URL") + " '" +
          s3.endpoint + "' is not an http:// or https:// URL");
    }
    root = s3.endpoint + "/" + PercentEncodePath(loc.bucket) + "/";  // path style
  } else if (loc.bucket.find('.') != std::string::npos) {
    root = "https://s3." + s3.region + ".amazonaws.com/" + PercentEncodePath(loc.bucket) + "/";
  } else {
    root = "https://" + loc.bucket + ".s3." + s3.region + ".amazonaws.com/";
  }
  loc.base_url = root + (loc.prefix.empty() ? "" : PercentEncodePath(loc.prefix) + "/");
  return loc;
}

// Hub repository names: letters, digits, '-', '_', '.' (not "." or "..").
bool ValidRepoPart(const std::string& part) { return ValidBucket(part); }

// A token may go over plain http only to this machine (location.h).
Status CheckBearerTransport(const std::string& url, const std::string& token,
                            const std::string& variable, const std::string& text) {
  if (token.empty() || StartsWith(url, "https://")) return Status::OK();
  for (const char* local : {"http://127.", "http://localhost", "http://[::1]"}) {
    if (StartsWith(url, local)) return Status::OK();
  }
  return Status::InvalidArgument(text + ": " + variable +
                                 " is set and the URL is plain http:// off this machine: a "
                                 "bearer token is sent only over https");
}

std::string HfToken(std::string* variable) {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    std::string v = Env(name);
    if (!v.empty()) {
      *variable = name;
      return v;
    }
  }
  std::string path = Env("HF_TOKEN_PATH");
  if (path.empty()) {
    std::string home = Env("HF_HOME");
    if (home.empty()) {
      const std::string cache = Env("XDG_CACHE_HOME");
      home = !cache.empty() ? cache + "/huggingface"
                            : (Env("HOME").empty() ? "" : Env("HOME") + "/.cache/huggingface");
    }
    if (!home.empty()) path = home + "/token";
  }
  std::string token;
  if (!path.empty() && ReadRegularFile(path, &token, 4096).ok()) {
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
    *variable = path;
  }
  return token;
}

// "hf://datasets/ORG/NAME[@REV][/PATH]".
Result<Location> ParseHf(const std::string& text) {
  const std::string rest = StripSlashes(text.substr(5));
  if (!StartsWith(rest, "datasets/")) {
    return Status::InvalidArgument(text +
                                   ": only dataset repositories are read "
                                   "(hf://datasets/ORG/NAME[@REV]/PATH)");
  }
  std::string after = rest.substr(9);
  const size_t org_end = after.find('/');
  if (org_end == std::string::npos) {
    return Status::InvalidArgument(text + ": no NAME after hf://datasets/ORG/");
  }
  const std::string org = after.substr(0, org_end);
  after = after.substr(org_end + 1);
  size_t name_end = after.find_first_of("@/");
  std::string name = after.substr(0, name_end);
  std::string revision = "main", path;
  if (name_end != std::string::npos && after[name_end] == '@') {
    std::string tail = after.substr(name_end + 1);
    // "refs/pr/N" and "refs/convert/X" hold slashes (huggingface_hub's special refs).
    size_t rev_end = tail.find('/');
    if (StartsWith(tail, "refs/pr/") || StartsWith(tail, "refs/convert/")) {
      rev_end = tail.find('/', tail.find('/', 5) + 1);
    }
    revision = tail.substr(0, rev_end);
    path = rev_end == std::string::npos ? "" : tail.substr(rev_end + 1);
  } else if (name_end != std::string::npos) {
    path = after.substr(name_end + 1);
  }
  path = StripSlashes(path);
  if (!ValidRepoPart(org) || !ValidRepoPart(name)) {
    return Status::InvalidArgument(text + ": '" + org + "/" + name +
                                   "' is not a repository id (letters, digits, '.', '-', '_')");
  }
  if (revision.empty()) return Status::InvalidArgument(text + ": an empty revision after '@'");
  MM_RETURN_NOT_OK(CheckNoDotSegments(revision, /*encoded=*/false, text));
  MM_RETURN_NOT_OK(CheckNoDotSegments(path, /*encoded=*/false, text));
  std::string endpoint = Env("HF_ENDPOINT");
  if (endpoint.empty()) endpoint = "https://huggingface.co";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (!LooksLikeHttpUrl(endpoint)) {
    return Status::InvalidArgument("HF_ENDPOINT '" + endpoint +
                                   "' is not an http:// or https:// URL");
  }
  Location loc;
  loc.kind = LocationKind::kHttp;
  loc.scheme = "hf";
  loc.text = "hf://" + rest;
  std::string encoded_revision = PercentEncodePath(revision);
  for (size_t at = encoded_revision.find('/'); at != std::string::npos;
       at = encoded_revision.find('/', at)) {
    encoded_revision.replace(at, 1, "%2F");
  }
  loc.base_url = endpoint + "/datasets/" + org + "/" + name + "/resolve/" + encoded_revision + "/" +
                 (path.empty() ? "" : PercentEncodePath(path) + "/");
  std::string variable;
  loc.bearer_token = HfToken(&variable);
  MM_RETURN_NOT_OK(CheckBearerTransport(loc.base_url, loc.bearer_token, variable, text));
  return loc;
}

}  // namespace

S3Settings S3Settings::FromEnvironment() {
  const AwsConfig config = AwsConfig::FromEnvironment();
  S3Settings s;
  s.region = config.region;
  s.endpoint = config.endpoint;
  s.error = config.error;
  if (s.error.empty()) s.credentials = CredentialProvider::AwsChain(config);
  return s;
}

S3Settings S3Settings::GcsFromEnvironment() {
  S3Settings s;
  s.region = "auto";  // GCS's region for Signature V4 with HMAC keys
  s.endpoint = Env("GCS_ENDPOINT_URL");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  if (s.endpoint.empty()) s.endpoint = "https://storage.googleapis.com";
  const std::string id = Env("GCS_ACCESS_KEY_ID"), secret = Env("GCS_SECRET_ACCESS_KEY");
  if (!id.empty() && secret.empty()) {
    s.error = "GCS_ACCESS_KEY_ID is set but GCS_SECRET_ACCESS_KEY is empty or unset";
    return s;
  }
  // One provider per key id and process, so that its line is said once.
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<CredentialProvider>>* providers =
      new std::map<std::string, std::shared_ptr<CredentialProvider>>();
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<CredentialProvider>& p = (*providers)[id + "\n" + secret];
  if (!p) {
    if (id.empty()) {
      p = CredentialProvider::Unsigned("GCS", "GCS_ACCESS_KEY_ID is not set");
    } else {
      AwsCredentials keys;
      keys.access_key_id = id;
      keys.secret_access_key = secret;
      p = CredentialProvider::Fixed("GCS", keys, "HMAC key (GCS_ACCESS_KEY_ID)");
    }
  }
  s.credentials = p;
  return s;
}

Result<std::string> Location::FileUrl(const std::string& name) const {
  if (name.empty() || name[0] == '/') {
    return Status::InvalidArgument(Display(name) + ": not a file name below the set");
  }
  MM_RETURN_NOT_OK(CheckNoDotSegments(name, /*encoded=*/false, Display(name)));
  return base_url + PercentEncodePath(name);  // a '%' in a name is sent as %25: itself
}

std::string Location::Display(const std::string& name) const { return text + "/" + name; }

bool IsRemoteLocation(const std::string& text) {
  for (const char* scheme : {"s3://", "gs://", "hf://", "http://", "https://"}) {
    if (StartsWith(text, scheme)) return true;
  }
  return false;
}

Result<Location> ParseLocation(const std::string& text) {
  if (StartsWith(text, "s3://")) return ParseBucket(text, "s3", S3Settings::FromEnvironment());
  if (StartsWith(text, "gs://")) return ParseBucket(text, "gs", S3Settings::GcsFromEnvironment());
  if (StartsWith(text, "hf://")) return ParseHf(text);
  MM_ASSIGN_OR_RETURN(Location loc, ParseLocation(text, S3Settings()));
  if (loc.kind == LocationKind::kHttp) {
    loc.bearer_token = Env("MMPACK_HTTP_TOKEN");
    MM_RETURN_NOT_OK(
        CheckBearerTransport(loc.base_url, loc.bearer_token, "MMPACK_HTTP_TOKEN", text));
  }
  return loc;
}

Result<Location> ParseLocation(const std::string& text, const S3Settings& s3) {
  if (StartsWith(text, "s3://")) return ParseBucket(text, "s3", s3);
  if (StartsWith(text, "gs://")) return ParseBucket(text, "gs", s3);
  if (StartsWith(text, "hf://")) return ParseHf(text);
  Location loc;
  if (StartsWith(text, "http://") || StartsWith(text, "https://")) {
    std::string url = text;
    while (!url.empty() && url.back() == '/') url.pop_back();
    if (!LooksLikeHttpUrl(url)) return Status::InvalidArgument(text + ": no host in the URL");
    if (url.find_first_of("?#") != std::string::npos) {
      return Status::InvalidArgument(text +
                                     ": a query or fragment in a set's URL (its files' "
                                     "names are appended to the path)");
    }
    const size_t host = url.find("://") + 3;
    const size_t path = url.find('/', host);
    if (path != std::string::npos) {
      MM_RETURN_NOT_OK(CheckNoDotSegments(url.substr(path + 1), /*encoded=*/true, text));
    }
    loc.kind = LocationKind::kHttp;
    loc.scheme = url.substr(0, url.find("://"));
    loc.text = url;
    loc.base_url = url + "/";
    return loc;
  }
  const size_t scheme = text.find("://");
  if (scheme != std::string::npos && text.find('/') > scheme) {
    return Status::InvalidArgument(text + ": unsupported scheme '" + text.substr(0, scheme) +
                                   "://' (s3://, gs://, hf://, http://, https:// or a local "
                                   "directory)");
  }
  loc.kind = LocationKind::kLocal;
  loc.text = text;
  while (loc.text.size() > 1 && loc.text.back() == '/') loc.text.pop_back();
  return loc;
}

std::string PercentEncodePath(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (unsigned char c : path) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                            c == '~' || c == '/';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace mm::reader::internal
