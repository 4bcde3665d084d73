// Remote sets against real servers on 127.0.0.1 (tests/remote/test_servers.h): s3rver (S3) and
// http_server.py (plain HTTP with injected failures, and a Signature V4 verifier). Reading,
// signing, errors, retries, checksums.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../remote/test_servers.h"
#include "mm/reader.h"
#include "remote/http.h"
#include "remote/location.h"
#include "remote_util.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::CountLogLines;
using mm::testing::FixtureOptions;
using mm::testing::ScopedEnv;
using mm::testing::StartHttpServer;
using mm::testing::StartS3rver;
using mm::testing::TempDir;

TEST(RemoteSet, ReadsFromS3ExactlyAsLocal) {
  MM_SKIP_WITHOUT_NODE();
  TempDir tmp("mm_remote");
  auto s3 = StartS3rver(tmp / "s3", "bkt");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  ScopedEnv env;
  env.S3((*s3)->url());
  const std::string local = CocoSet(testing::SmallShards());
  ASSERT_TRUE(testing::Upload(local, "s3://bkt/sets/coco").ok());
  OpenOptions o = testing::CacheOptions(tmp / "cache");
  auto remote = ShardSet::Open("s3://bkt/sets/coco", o);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_TRUE((*remote)->remote());
  EXPECT_EQ((*remote)->info().root, "s3://bkt/sets/coco");
  auto opened = ShardSet::Open(local);
  ASSERT_TRUE(opened.ok());
  testing::ExpectSameBatches(*opened, *remote, /*epochs=*/2);
  const CacheStats stats = (*remote)->cache_stats();
  EXPECT_EQ(stats.downloads, static_cast<int64_t>((*remote)->num_shards()));  // once each
  EXPECT_EQ(stats.downloaded_bytes, testing::SetBytes(local));
}

TEST(RemoteSet, ReadsFromHttpExactlyAsLocal) {
  TempDir tmp("mm_remote");
  const std::string local = CocoSet(testing::SmallShards());
  testing::Mirror(local, tmp / "www/sets/coco");
  auto http = StartHttpServer(tmp / "www", {"--log", tmp / "requests.log"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  auto remote = ShardSet::Open((*http)->url() + "/sets/coco/", testing::CacheOptions(tmp / "c"));
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  auto opened = ShardSet::Open(local);
  testing::ExpectSameBatches(*opened, *remote, /*epochs=*/1);
  // A second set object over the same cache finds every shard there.
  auto again = ShardSet::Open((*http)->url() + "/sets/coco", testing::CacheOptions(tmp / "c"));
  ASSERT_TRUE(again.ok());
  testing::ExpectSameBatches(*opened, *again, /*epochs=*/1);
  EXPECT_EQ((*again)->cache_stats().downloads, 0);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", ".h5 200"),
            static_cast<int>((*remote)->num_shards()));
}

// s3rver does not check Signature V4 signatures, only that the access key id exists: so this
// is all a wrong credential can show against it (the signature itself: the next test).
TEST(RemoteSet, UnknownAccessKeyIsRefusedNamingTheUrl) {
  MM_SKIP_WITHOUT_NODE();
  TempDir tmp("mm_remote");
  auto s3 = StartS3rver(tmp / "s3", "bkt");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  ScopedEnv env;
  env.S3((*s3)->url());
  ASSERT_TRUE(testing::Upload(CocoSet(testing::SmallShards()), "s3://bkt/coco").ok());
  env.S3((*s3)->url(), "NOT-A-KEY", "S3RVER");
  auto r = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp / "cache"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError);
  EXPECT_NE(r.status().message().find("GET " + (*s3)->url() + "/bkt/coco/index.json"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("HTTP 403 (InvalidAccessKeyId"), std::string::npos);
}

// Our signatures checked by a server that computes them (http_server.py --sigv4, after AWS's
// Signature V4 algorithm): the right secret reads, a wrong one is refused, a session token is
// signed along.
TEST(RemoteSet, SignatureV4IsVerifiedByASigningServer) {
  TempDir tmp("mm_remote");
  testing::Mirror(CocoSet(testing::SmallShards()), tmp / "www/bkt/coco");
  auto http = StartHttpServer(tmp / "www", {"--sigv4", "AKID:correct-secret"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  ScopedEnv env;
  env.S3((*http)->url(), "AKID", "correct-secret");
  auto good = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp / "c1"));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  testing::ExpectSameBatches(*ShardSet::Open(tmp / "www/bkt/coco"), *good, 1);

  env.Set("AWS_SESSION_TOKEN", "token/with+odd=chars");
  auto with_token = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp / "c2"));
  ASSERT_TRUE(with_token.ok()) << with_token.status().ToString();
  EXPECT_TRUE((*with_token)->PinShard(0).ok());

  env.S3((*http)->url(), "AKID", "wrong-secret");
  auto bad = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp / "c3"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HTTP 403 (SignatureDoesNotMatch"), std::string::npos)
      << bad.status().ToString();
}

TEST(RemoteSet, MissingKeyIsNotFoundNamingTheUrl) {
  MM_SKIP_WITHOUT_NODE();
  TempDir tmp("mm_remote");
  auto s3 = StartS3rver(tmp / "s3", "bkt");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  ScopedEnv env;
  env.S3((*s3)->url());
  auto none = ShardSet::Open("s3://bkt/no/such/set", testing::CacheOptions(tmp / "cache"));
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.status().IsNotFound()) << none.status().ToString();
  EXPECT_NE(none.status().message().find("/bkt/no/such/set/index.json"), std::string::npos);
  EXPECT_NE(none.status().message().find("NoSuchKey"), std::string::npos);

  // index.json present, a shard missing: Open succeeds (it reads no shard), the pin fails.
  const std::string local = CocoSet(testing::SmallShards());
  ASSERT_TRUE(testing::Upload(local, "s3://bkt/partial", {"shard-000001.h5"}).ok());
  auto partial = ShardSet::Open("s3://bkt/partial", testing::CacheOptions(tmp / "cache"));
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_TRUE((*partial)->PinShard(0).ok());
  auto pin = (*partial)->PinShard(1);
  ASSERT_FALSE(pin.ok());
  EXPECT_TRUE(pin.status().IsNotFound()) << pin.status().ToString();
  EXPECT_NE(pin.status().message().find("/bkt/partial/shard-000001.h5"), std::string::npos);
}

TEST(RemoteSet, ServerDyingMidDownloadIsRetried) {
  TempDir tmp("mm_remote");
  const std::string local = CocoSet(testing::SmallShards());
  testing::Mirror(local, tmp / "www/coco");
  auto http = StartHttpServer(tmp / "www",
                              {"--fail", "*/shard-000001.h5:die:2", "--log", tmp / "requests.log"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  auto set = ShardSet::Open((*http)->url() + "/coco", testing::CacheOptions(tmp / "c"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  testing::ExpectSameBatches(*ShardSet::Open(local), *set, 1);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "shard-000001.h5 200 die"), 2);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "shard-000001.h5 200"), 3);  // 2 cut, 1 whole
  // Bytes of the cut tries count too: more than the set, less than the set plus one shard.
  EXPECT_GT((*set)->cache_stats().downloaded_bytes, testing::SetBytes(local));
}

TEST(RemoteSet, ServerThatKeepsDyingIsAClearErrorAfterBoundedTries) {
  TempDir tmp("mm_remote");
  testing::Mirror(CocoSet(testing::SmallShards()), tmp / "www/coco");
  auto http = StartHttpServer(
      tmp / "www", {"--fail", "*/shard-000000.h5:die:always", "--log", tmp / "requests.log"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  OpenOptions o = testing::CacheOptions(tmp / "c");
  o.remote.max_attempts = 3;
  auto set = ShardSet::Open((*http)->url() + "/coco", o);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto pin = (*set)->PinShard(0);
  ASSERT_FALSE(pin.ok());
  EXPECT_EQ(pin.status().code(), StatusCode::kIOError) << pin.status().ToString();
  EXPECT_NE(pin.status().message().find("GET " + (*http)->url() + "/coco/shard-000000.h5"),
            std::string::npos)
      << pin.status().ToString();
  EXPECT_NE(pin.status().message().find("connection closed after"), std::string::npos);
  EXPECT_NE(pin.status().message().find("(3 tries over"), std::string::npos);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "shard-000000.h5 200 die"), 3);
  // Nothing half-written is left in the cache.
  EXPECT_EQ(testing::CachedFiles(tmp / "c"), 0);
}

TEST(RemoteSet, CorruptedDownloadIsCaughtByTheChecksum) {
  TempDir tmp("mm_remote");
  const std::string local = CocoSet(testing::SmallShards());
  testing::Mirror(local, tmp / "www/coco");
  auto http = StartHttpServer(tmp / "www", {"--fail", "*/shard-000001.h5:corrupt:1", "--fail",
                                            "*/shard-000002.h5:corrupt:always"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  auto set = ShardSet::Open((*http)->url() + "/coco", testing::CacheOptions(tmp / "c"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_TRUE((*set)->PinShard(1).ok());  // corrupted once, downloaded again, right
  auto pin = (*set)->PinShard(2);
  ASSERT_FALSE(pin.ok());
  EXPECT_TRUE(pin.status().IsCorruption()) << pin.status().ToString();
  EXPECT_NE(pin.status().message().find("coco/shard-000002.h5: downloaded bytes have XXH3-64"),
            std::string::npos)
      << pin.status().ToString();
  EXPECT_NE(pin.status().message().find("(downloaded twice)"), std::string::npos);
}

TEST(RemoteSet, ServerErrorsAndStallsAreRetriedWithBackoff) {
  TempDir tmp("mm_remote");
  const std::string local = CocoSet(testing::SmallShards());
  testing::Mirror(local, tmp / "www/coco");
  auto http = StartHttpServer(
      tmp / "www", {"--fail", "*/index.json:503:2", "--fail", "*/shard-000000.h5:500:1", "--fail",
                    "*/shard-000001.h5:stall:1", "--log", tmp / "requests.log"});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  OpenOptions o = testing::CacheOptions(tmp / "c");
  o.remote.stall_timeout_s = 1;
  auto set = ShardSet::Open((*http)->url() + "/coco", o);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  testing::ExpectSameBatches(*ShardSet::Open(local), *set, 1);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "index.json 503"), 2);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "shard-000000.h5 500"), 1);
  EXPECT_EQ(CountLogLines(tmp / "requests.log", "shard-000001.h5 200 stall"), 1);
}

TEST(RemoteSet, DeadServerIsAClearErrorNamingTheUrl) {
  TempDir tmp("mm_remote");
  auto http = StartHttpServer(tmp / "www");
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const std::string url = (*http)->url() + "/coco";
  (*http)->Kill();
  OpenOptions o = testing::CacheOptions(tmp / "c");
  o.remote.max_attempts = 2;
  auto r = ShardSet::Open(url, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError);
  EXPECT_NE(r.status().message().find("GET " + url + "/index.json"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("(2 tries over"), std::string::npos);
}

TEST(RemoteSet, MalformedLocationsAreInvalidArguments) {
  for (const char* bad : {"s3://", "s3:///prefix", "http://", "ftp://host/set"}) {
    auto r = ShardSet::Open(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  ScopedEnv env;
  env.Set("AWS_ENDPOINT_URL", "127.0.0.1:9000");  // no scheme
  auto r = ShardSet::Open("s3://bkt/set");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_ENDPOINT_URL"), std::string::npos);
}

// Keys are not paths: a "." or ".." segment would be resolved away by libcurl or the server and
// name another prefix or bucket ("s3://bkt/../other/set" read bucket "other"'s set).
TEST(RemoteLocation, DotSegmentsAreRefusedNotResolvedIntoAnotherBucket) {
  internal::S3Settings aws;
  aws.endpoint = "http://127.0.0.1:9";
  for (const char* bad :
       {"s3://bkt/../other/victim", "s3://bkt/x/../../other/victim", "s3://bkt/./set",
        "s3://bkt/set/..", "s3://../other", "s3://./x", "s3://b%2fk/set", "http://h/a/../b",
        "http://h/a/%2E%2e/b", "https://h/./b", "http://h/set?x=1", "http://h/set#frag"}) {
    auto r = internal::ParseLocation(bad, aws);
    ASSERT_FALSE(r.ok()) << bad << " -> " << r->base_url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().ToString();
  }
  // Dots inside a segment are ordinary key characters.
  for (const char* good : {"s3://bkt/a..b/.c/d.", "s3://my.bucket/x", "http://h/a..b/.c"}) {
    auto r = internal::ParseLocation(good, aws);
    EXPECT_TRUE(r.ok()) << good << ": " << r.status().ToString();
  }
  auto set = internal::ParseLocation("s3://bkt/sets/a", aws);
  ASSERT_TRUE(set.ok());
  for (const char* name : {"../../other/victim/index.json", "..", "x/./y", "/abs"}) {
    auto url = set->FileUrl(name);
    EXPECT_FALSE(url.ok()) << name << " -> " << *url;
  }
  EXPECT_EQ(*set->FileUrl("shard..000.h5"), "http://127.0.0.1:9/bkt/sets/a/shard..000.h5");
  // ShardSet::Open refuses before any request (the endpoint does not listen).
  ScopedEnv env;
  env.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
  auto opened = ShardSet::Open("s3://bkt/../other/victim");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("'..' path segment"), std::string::npos);
}

// An access key id without its secret would be signed with an empty secret and refused by the
// server as "SignatureDoesNotMatch", which does not say what is missing.
TEST(RemoteSet, AnAccessKeyWithoutASecretNamesTheMissingVariable) {
  ScopedEnv env;
  env.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:9");  // never asked: the check comes first
  env.Set("AWS_ACCESS_KEY_ID", "S3RVER");
  for (bool unset : {false, true}) {
    if (unset) {
      env.Unset("AWS_SECRET_ACCESS_KEY");
    } else {
      env.Set("AWS_SECRET_ACCESS_KEY", "");
    }
    auto r = ShardSet::Open("s3://bkt/set");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find("AWS_SECRET_ACCESS_KEY is empty or unset"),
              std::string::npos)
        << r.status().ToString();
  }
}

TEST(RemoteLocation, S3AddressingFollowsTheEnvironment) {
  internal::S3Settings aws;
  aws.region = "eu-west-1";
  auto hosted = internal::ParseLocation("s3://my-bucket/a b/c/", aws);
  ASSERT_TRUE(hosted.ok());
  EXPECT_EQ(hosted->text, "s3://my-bucket/a b/c");
  EXPECT_EQ(*hosted->FileUrl("index.json"),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/a%20b/c/index.json");
  auto dotted = internal::ParseLocation("s3://my.bucket/x", aws);
  EXPECT_EQ(*dotted->FileUrl("f"), "https://s3.eu-west-1.amazonaws.com/my.bucket/x/f");
  aws.endpoint = "http://127.0.0.1:9000";
  auto path_style = internal::ParseLocation("s3://bkt", aws);
  EXPECT_EQ(*path_style->FileUrl("shard-000000.h5"), "http://127.0.0.1:9000/bkt/shard-000000.h5");
  ScopedEnv env;
  env.Unset("AWS_REGION");
  env.Set("AWS_DEFAULT_REGION", "ap-south-1");
  env.Set("AWS_ENDPOINT_URL", "http://localhost:1/");
  const internal::S3Settings from_env = internal::S3Settings::FromEnvironment();
  EXPECT_EQ(from_env.region, "ap-south-1");
  EXPECT_EQ(from_env.endpoint, "http://localhost:1");
}

}  // namespace
}  // namespace mm::reader
