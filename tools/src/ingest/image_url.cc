// image_url.cc: see image_url.h.
#include "ingest/image_url.h"

#include <string_view>
#include <vector>

#include "ingest/common.h"
#include "ingest/ingest.h"
#include "text/ascii.h"

namespace mm::pack {
namespace {

// The scheme of `url`, lowercased, with https as http: the family whose URLs one manifest
// may name.
std::string Family(const std::string& url) {
  const std::string scheme = AsciiLower(url.substr(0, url.find("://")));
  return scheme == "https" ? "http" : scheme;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding: "%20" -> ' '; a '%' without two hex digits stays as it is.
std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = s[i] == '%' && i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(s[i + 2]) : -1;
    if (lo >= 0) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

ResolvedImage Refused(const char* reason, std::string detail) {
  ResolvedImage r;
  r.reason = reason;
  r.detail = std::move(detail);
  return r;
}

// Where `url`'s path starts: after the bucket (s3://, gs://) or the host (http(s)://); for
// hf://, whose revision may hold slashes, `url`'s end (its folder is the root).
size_t RootEnd(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (Family(url) == "hf") return url.size();
  const size_t slash = url.find('/', scheme_end + 3);
  return slash == std::string::npos ? url.size() : slash;
}

// `given`, relative, against the URL `base`: its segments after base's, "." and "" dropped,
// ".." taking one back (never above the root).
ResolvedImage RelativeUrl(const std::string& base, const std::string& given) {
  if (given[0] == '/') {
    return Refused("invalid_manifest_line",
                   "image '" + given + "' is an absolute local path in a manifest at " + base +
                       "/; name it relative to the manifest or by its URL");
  }
  const size_t root_end = RootEnd(base);
  const std::string root = base.substr(0, root_end);
  std::string path = root_end < base.size() ? base.substr(root_end + 1) : "";
  if (Family(base) == "http") path = PercentDecode(path);
  std::vector<std::string> segments;
  auto add = [&](const std::string& both) {
    size_t start = 0;
    for (;;) {
      const size_t slash = both.find('/', start);
      const std::string seg = both.substr(start, slash - start);
      if (seg == "..") {
        if (segments.empty()) return false;
        segments.pop_back();
      } else if (!seg.empty() && seg != ".") {
        segments.push_back(seg);
      }
      if (slash == std::string::npos) return true;
      start = slash + 1;
    }
  };
  add(path);
  if (!add(given) || segments.empty()) {
    return Refused("invalid_manifest_line", "image '" + given + "' leads above " + root +
                                                "/ (from the manifest at " + base + "/)");
  }
  ResolvedImage r;
  r.path = root;
  for (const std::string& seg : segments) r.path += "/" + seg;
  return r;
}

// The URL `given` in a manifest at the URL `base`: of the same family, as a raw URL.
ResolvedImage AbsoluteUrl(const std::string& base, const std::string& given) {
  const std::string family = Family(base);
  if (Family(given) != family) {
    return Refused("remote_image_not_supported", "image '" + given + "' is not a " + family +
                                                     ":// URL; a manifest at " + base +
                                                     "/ names images of its own store (" + family +
                                                     ":// URLs or paths relative to it)");
  }
  if (family != "http") return ResolvedImage{given, nullptr, ""};
  // A web server's images on another host (or scheme, or port) are refused: the manifest's
  // credentials (MMPACK_HTTP_TOKEN) would go with every GET, and a manifest could point the
  // build at any host the machine reaches.
  const std::string origin = AsciiLower(base.substr(0, RootEnd(base)));
  if (AsciiLower(given.substr(0, RootEnd(given))) != origin) {
    return Refused("remote_image_not_supported",
                   "image '" + given + "' is not on " + origin + ", the server of its manifest (" +
                       base + "/); mmpack fetches a manifest's images from its own server only");
  }
  if (given.find_first_of("?#") != std::string::npos) {
    return Refused("invalid_manifest_line", "image URL '" + given +
                                                "' has a query or fragment; mmpack reads "
                                                "files by path");
  }
  return ResolvedImage{base.substr(0, RootEnd(base)) + PercentDecode(given.substr(RootEnd(given))),
                       nullptr, ""};
}

}  // namespace

ResolvedImage ResolveImagePath(const std::string& base, const std::string& given) {
  if (!IsRemoteUrl(base)) {
    if (IsRemoteUrl(given)) {
      return Refused("remote_image_not_supported",
                     "image '" + given +
                         "' is a URL in a local manifest, which names local files; put the "
                         "manifest at a URL of the images' store (its paths relative to it), "
                         "or download them first (img2dataset downloads URL lists)");
    }
    return ResolvedImage{Resolve(base, given), nullptr, ""};
  }
  if (given.empty()) return Refused("invalid_manifest_line", "empty image path");
  if (IsRemoteUrl(given)) return AbsoluteUrl(base, given);
  return RelativeUrl(base, given);
}

}  // namespace mm::pack
