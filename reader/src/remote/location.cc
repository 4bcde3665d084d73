// location.cc: see location.h.
#include "remote/location.h"

#include <cctype>
#include <cstdlib>

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

Result<Location> ParseS3(const std::string& text, const S3Settings& s3) {
  std::string rest = text.substr(5);  // after "s3://"
  const size_t slash = rest.find('/');
  Location loc;
  loc.kind = LocationKind::kS3;
  loc.bucket = rest.substr(0, slash);
  loc.prefix = slash == std::string::npos ? "" : StripSlashes(rest.substr(slash));
  loc.s3 = s3;
  if (loc.bucket.empty()) return Status::InvalidArgument(text + ": no bucket after s3://");
  if (!ValidBucket(loc.bucket)) {
    return Status::InvalidArgument(text + ": bucket name '" + loc.bucket +
                                   "' is not letters, digits, '.', '-' and '_'");
  }
  MM_RETURN_NOT_OK(CheckNoDotSegments(loc.prefix, /*encoded=*/false, text));
  if (!s3.access_key_id.empty() && s3.secret_access_key.empty()) {
    // Signing with an empty secret only earns the server's SignatureDoesNotMatch.
    return Status::InvalidArgument(text +
                                   ": AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is "
                                   "empty or unset: set both (or neither, for a public bucket)");
  }
  loc.text = "s3://" + loc.bucket + (loc.prefix.empty() ? "" : "/" + loc.prefix);
  std::string root;
  if (!s3.endpoint.empty()) {
    if (!LooksLikeHttpUrl(s3.endpoint)) {
      return Status::InvalidArgument("AWS_ENDPOINT_URL '" + s3.endpoint +
                                     "' is not an http:// or https:// URL");
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

}  // namespace

S3Settings S3Settings::FromEnvironment() {
  S3Settings s;
  s.access_key_id = Env("AWS_ACCESS_KEY_ID");
  s.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  s.session_token = Env("AWS_SESSION_TOKEN");
  std::string region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (!region.empty()) s.region = region;
  s.endpoint = Env("AWS_ENDPOINT_URL");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
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
  return StartsWith(text, "s3://") || StartsWith(text, "http://") || StartsWith(text, "https://");
}

Result<Location> ParseLocation(const std::string& text, const S3Settings& s3) {
  if (StartsWith(text, "s3://")) return ParseS3(text, s3);
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
    loc.text = url;
    loc.base_url = url + "/";
    return loc;
  }
  const size_t scheme = text.find("://");
  if (scheme != std::string::npos && text.find('/') > scheme) {
    return Status::InvalidArgument(text + ": unsupported scheme '" + text.substr(0, scheme) +
                                   "://' (s3://, http://, https:// or a local directory)");
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
