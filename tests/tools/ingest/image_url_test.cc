// Tests of ingest/image_url.h: what a manifest's image path names, for a local manifest and for
// one at a URL (s3://b/p/m.jsonl + "img/1.jpg" -> s3://b/p/img/1.jpg).
#include "ingest/image_url.h"

#include <gtest/gtest.h>

#include <string>

namespace mm::pack {
namespace {

std::string Path(const std::string& base, const std::string& given) {
  ResolvedImage r = ResolveImagePath(base, given);
  EXPECT_EQ(r.reason, nullptr) << base << " + " << given << ": " << r.detail;
  return r.path;
}

std::string Reason(const std::string& base, const std::string& given) {
  ResolvedImage r = ResolveImagePath(base, given);
  EXPECT_NE(r.reason, nullptr) << base << " + " << given << " gave " << r.path;
  EXPECT_NE(r.detail.find(given), std::string::npos) << r.detail;  // names the path
  return r.reason == nullptr ? "" : r.reason;
}

TEST(ResolveImagePath, RelativePathsJoinTheManifestsFolderUrl) {
  EXPECT_EQ(Path("s3://b/p", "img/1.jpg"), "s3://b/p/img/1.jpg");
  EXPECT_EQ(Path("s3://b", "./img//1.jpg"), "s3://b/img/1.jpg");
  EXPECT_EQ(Path("s3://b/p/q", "../img/1.jpg"), "s3://b/p/img/1.jpg");
  EXPECT_EQ(Path("gs://b/p", "1.jpg"), "gs://b/p/1.jpg");
  EXPECT_EQ(Path("hf://datasets/o/n@refs/pr/1/data", "img/1.jpg"),
            "hf://datasets/o/n@refs/pr/1/data/img/1.jpg");
  EXPECT_EQ(Path("http://h:8/x%20y", "a b/c.jpg"), "http://h:8/x y/a b/c.jpg");  // raw
}

TEST(ResolveImagePath, NeverAboveTheBucketHostOrHfFolder) {
  EXPECT_EQ(Reason("s3://b/p", "../../x.jpg"), "invalid_manifest_line");
  EXPECT_EQ(Reason("http://h/p", "../../x.jpg"), "invalid_manifest_line");
  EXPECT_EQ(Reason("hf://datasets/o/n/data", "../x.jpg"), "invalid_manifest_line");
  EXPECT_EQ(Path("http://h/p", "../x.jpg"), "http://h/x.jpg");
}

TEST(ResolveImagePath, AbsoluteUrlsOfTheSameStoreOnly) {
  EXPECT_EQ(Path("s3://b/p", "s3://other/k/1.jpg"), "s3://other/k/1.jpg");
  EXPECT_EQ(Path("https://h/p", "https://h/a%20b.jpg"), "https://h/a b.jpg");  // decoded
  EXPECT_EQ(Path("http://h:8/p", "HTTP://H:8/1.jpg"), "http://h:8/1.jpg");  // one origin
  // A web server's images on its own origin only: the manifest's credentials go with each GET.
  EXPECT_EQ(Reason("https://h/p", "https://g/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("https://h/p", "http://h/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("http://h:8/p", "http://h:9/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("http://h/p", "http://h@g/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("s3://b/p", "http://h/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("s3://b/p", "gs://b/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("http://h/p", "s3://b/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("http://h/p", "http://h/1.jpg?size=2"), "invalid_manifest_line");
}

TEST(ResolveImagePath, AnAbsoluteLocalPathInARemoteManifestIsRefused) {
  EXPECT_EQ(Reason("s3://b/p", "/data/1.jpg"), "invalid_manifest_line");
}

TEST(ResolveImagePath, ALocalManifestNamesLocalFilesOnly) {
  EXPECT_EQ(Path("/data/set", "img/../1.jpg"), "/data/set/1.jpg");
  EXPECT_EQ(Path("", "1.jpg"), "1.jpg");
  EXPECT_EQ(Path("/data/set", "/abs/1.jpg"), "/abs/1.jpg");
  EXPECT_EQ(Reason("/data/set", "s3://b/1.jpg"), "remote_image_not_supported");
  EXPECT_EQ(Reason("/data/set", "https://h/1.jpg"), "remote_image_not_supported");
}

}  // namespace
}  // namespace mm::pack
