// image_url.h: what the image path of a manifest names (private to ingest/): a local file
// resolved against a local manifest's folder, or, for a manifest at a URL, an object of the same
// store resolved against that URL's folder (s3://b/p/m.jsonl + "img/1.jpg" -> s3://b/p/img/1.jpg).
#pragma once

#include <string>

namespace mm::pack {

/// An image path of a manifest as ResolveImagePath reads it.
struct ResolvedImage {
  std::string path;  // the file to read: a local path, or a raw URL (remote_file.h)
  // Non-null when the path cannot be read: an IngestIssue's reason (remote_image_not_supported,
  // invalid_manifest_line) and its detail, naming the path.
  const char* reason = nullptr;
  std::string detail;
};

/// `given` (a manifest's image field) against `base`, the manifest's folder (a local path) or
/// the URL of its folder (no trailing '/'). The rules (README "Inputs" states them for users):
/// - A local manifest names local files: relative to its folder or absolute (Resolve, common.h).
///   A URL there is remote_image_not_supported (mmpack is no crawler: img2dataset downloads
///   URL lists).
/// - A manifest at a URL names objects of its own store: a path relative to its folder
///   ("img/1.jpg", "../img/1.jpg", never above the bucket or host; hf://, never above the
///   manifest's folder), or an absolute URL of the same scheme family (s3:// in an s3://
///   manifest, gs:// in gs://, hf:// in hf://, http:// or https:// in http(s)://), which is
///   read with the manifest's credentials. A URL of another family is
///   remote_image_not_supported; an absolute local path ("/data/1.jpg"), a query or fragment
///   in an http(s) URL, or a path above the root are invalid_manifest_line.
/// http(s) URLs are written percent-encoded (as on the web) and come back decoded (the remote
/// layer encodes them again); object store keys (s3://, gs://, hf://) are taken as written.
ResolvedImage ResolveImagePath(const std::string& base, const std::string& given);

}  // namespace mm::pack
