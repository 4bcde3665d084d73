// gs:// and hf:// locations (reader/src/remote/location.h): the URLs they are read from, where
// their keys and tokens come from, and what is refused before any request. No server: the
// reading itself is tested end to end by tests/e2e/remote_sync_test.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../remote/test_servers.h"
#include "remote/credentials.h"
#include "remote/location.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::ScopedEnv;
using mm::testing::TempDir;

class ObjectStoreLocation : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME",
                             "HF_ENDPOINT", "XDG_CACHE_HOME", "GCS_ACCESS_KEY_ID",
                             "GCS_SECRET_ACCESS_KEY", "GCS_ENDPOINT_URL", "MMPACK_HTTP_TOKEN"}) {
      env_.Unset(name);
    }
    env_.Set("HOME", tmp_ / "home");
  }
  void WriteToken(const std::string& path, const std::string& token) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << token;
  }
  TempDir tmp_{"mm_objloc"};
  ScopedEnv env_;
};

TEST_F(ObjectStoreLocation, HfDatasetsAreReadThroughTheHubsResolveUrls) {
  auto plain = internal::ParseLocation("hf://datasets/org/cc-3m/sets/coco/");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->kind, internal::LocationKind::kHttp);
  EXPECT_EQ(plain->scheme, "hf");
  EXPECT_EQ(plain->text, "hf://datasets/org/cc-3m/sets/coco");
  EXPECT_EQ(*plain->FileUrl("index.json"),
            "https://huggingface.co/datasets/org/cc-3m/resolve/main/sets/coco/index.json");
  EXPECT_EQ(plain->bearer_token, "");
  auto root = internal::ParseLocation("hf://datasets/org/cc");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root->FileUrl("index.json"),
            "https://huggingface.co/datasets/org/cc/resolve/main/index.json");
  auto tagged = internal::ParseLocation("hf://datasets/org/cc@v1.0/a b");
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(*tagged->FileUrl("x.h5"),
            "https://huggingface.co/datasets/org/cc/resolve/v1.0/a%20b/x.h5");
  // A pull request's ref holds slashes: taken whole, sent as one segment.
  auto pr = internal::ParseLocation("hf://datasets/org/cc@refs/pr/3/sets/coco");
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  EXPECT_EQ(*pr->FileUrl("index.json"),
            "https://huggingface.co/datasets/org/cc/resolve/refs%2Fpr%2F3/sets/coco/index.json");
  env_.Set("HF_ENDPOINT", "http://127.0.0.1:9/");
  auto local = internal::ParseLocation("hf://datasets/org/cc");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->base_url, "http://127.0.0.1:9/datasets/org/cc/resolve/main/");
}

TEST_F(ObjectStoreLocation, TheHfTokenComesFromTheVariablesThenTheTokenFiles) {
  const std::string url = "hf://datasets/org/cc";
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "");
  WriteToken(tmp_ / "home/.cache/huggingface/token", "hf_home_default\n");
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "hf_home_default");
  WriteToken(tmp_ / "hfhome/token", "hf_from_hf_home");
  env_.Set("HF_HOME", tmp_ / "hfhome");
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "hf_from_hf_home");
  WriteToken(tmp_ / "path-token", "hf_from_path\n");
  env_.Set("HF_TOKEN_PATH", tmp_ / "path-token");
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "hf_from_path");
  env_.Set("HUGGING_FACE_HUB_TOKEN", "hf_legacy");
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "hf_legacy");
  env_.Set("HF_TOKEN", "hf_variable");
  EXPECT_EQ(internal::ParseLocation(url)->bearer_token, "hf_variable");
}

TEST_F(ObjectStoreLocation, ATokenIsNeverSentOverPlainHttpOffThisMachine) {
  env_.Set("HF_TOKEN", "hf_secret");
  env_.Set("HF_ENDPOINT", "http://hub.example.com");
  auto hf = internal::ParseLocation("hf://datasets/org/cc");
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hf.status().message().find("HF_TOKEN is set"), std::string::npos)
      << hf.status().ToString();
  for (const char* ok :
       {"http://127.0.0.1:8080", "http://localhost:1", "https://hub.example.com"}) {
    env_.Set("HF_ENDPOINT", ok);
    EXPECT_TRUE(internal::ParseLocation("hf://datasets/org/cc").ok()) << ok;
  }
  env_.Set("MMPACK_HTTP_TOKEN", "t");
  auto http = internal::ParseLocation("http://files.example.com/sets/coco");
  ASSERT_FALSE(http.ok());
  EXPECT_NE(http.status().message().find("MMPACK_HTTP_TOKEN"), std::string::npos);
  auto https = internal::ParseLocation("https://files.example.com/sets/coco");
  ASSERT_TRUE(https.ok());
  EXPECT_EQ(https->bearer_token, "t");
}

TEST_F(ObjectStoreLocation, MalformedHfLocationsAreRefusedNamingThem) {
  for (const auto& [text, words] : std::vector<std::pair<std::string, std::string>>{
           {"hf://models/org/m", "only dataset repositories"},
           {"hf://datasets/org", "no NAME"},
           {"hf://datasets/org/c$c", "is not a repository id"},
           {"hf://datasets/org/cc@", "an empty revision"},
           {"hf://datasets/org/cc/../other", "'..'"},
           {"hf://datasets/org/cc@../x", "'..'"}}) {
    auto r = internal::ParseLocation(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
  }
}

TEST_F(ObjectStoreLocation, GsBucketsGoToGcsXmlApiWithHmacKeysNeverAwsOnes) {
  env_.Set("AWS_ACCESS_KEY_ID", "AKIDAWS");
  env_.Set("AWS_SECRET_ACCESS_KEY", "aws-secret");
  env_.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
  auto gs = internal::ParseLocation("gs://my-bucket/sets/coco");
  ASSERT_TRUE(gs.ok()) << gs.status().ToString();
  EXPECT_EQ(gs->kind, internal::LocationKind::kS3);
  EXPECT_EQ(gs->scheme, "gs");
  EXPECT_EQ(gs->s3.region, "auto");
  EXPECT_EQ(*gs->FileUrl("index.json"),
            "https://storage.googleapis.com/my-bucket/sets/coco/index.json");
  ::testing::internal::CaptureStderr();
  auto keys = gs->s3.credentials->Get();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, nullptr);  // unsigned: the AWS keys are not for Google
  EXPECT_NE(err.find("GCS credentials: no credentials found: unsigned requests"), std::string::npos)
      << err;
  env_.Set("GCS_ACCESS_KEY_ID", "GOOG1EKEY");
  env_.Set("GCS_SECRET_ACCESS_KEY", "hmac");
  env_.Set("GCS_ENDPOINT_URL", "http://127.0.0.1:2/");
  auto hmac = internal::ParseLocation("gs://my-bucket");
  ASSERT_TRUE(hmac.ok());
  EXPECT_EQ(*hmac->FileUrl("f"), "http://127.0.0.1:2/my-bucket/f");
  auto signing = hmac->s3.credentials->Get();
  ASSERT_TRUE(signing.ok() && *signing);
  EXPECT_EQ((*signing)->access_key_id, "GOOG1EKEY");
  env_.Unset("GCS_SECRET_ACCESS_KEY");
  auto half = internal::ParseLocation("gs://my-bucket");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("GCS_SECRET_ACCESS_KEY"), std::string::npos);
}

}  // namespace
}  // namespace mm::reader
