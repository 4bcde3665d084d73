// The S3 credential chain (reader/src/remote/credentials.h) against servers on 127.0.0.1 only:
// http_server.py serving a set path style and verifying Signature V4 (its log says which key
// signed each request), and aws_identity_server.py standing in for the instance metadata
// service (IMDSv2) and STS (AssumeRoleWithWebIdentity), each checking the requests it gets.
// Every test starts from an environment with no AWS variable, HOME in its temporary folder.
#include "remote/credentials.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "../remote/test_servers.h"
#include "mm/reader.h"
#include "remote/ini_file.h"
#include "remote/location.h"
#include "remote_util.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::CountLogLines;
using mm::testing::ScopedEnv;
using mm::testing::ServerProcess;
using mm::testing::StartHttpServer;
using mm::testing::StartIdentityServer;
using mm::testing::TempDir;

constexpr char kRoleArn[] = "arn:aws:iam::123456789012:role/mmpack-reader";
constexpr char kWebToken[] = "eyJhbGciOiJSUzI1NiJ9.k8s-service-account.signature";
constexpr char kContainerToken[] = "eks-pod-identity-token-0123456789";

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// The access key ids that signed requests in an http_server.py --log file.
std::set<std::string> KeysUsed(const std::string& log) {
  std::set<std::string> keys;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(" key=");
    if (at != std::string::npos) keys.insert(line.substr(at + 5));
  }
  return keys;
}

// A set at s3://bkt/coco on a verifying server; the identity server; an environment with none of
// AWS's variables (HOME in the temporary folder, so ~/.aws is ours).
class CredentialChain : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::Mirror(CocoSet(testing::SmallShards()), tmp_ / "www/bkt/coco");
    for (const char* name : {"AWS_ACCESS_KEY_ID",
                             "AWS_SECRET_ACCESS_KEY",
                             "AWS_SESSION_TOKEN",
                             "AWS_PROFILE",
                             "AWS_DEFAULT_PROFILE",
                             "AWS_REGION",
                             "AWS_DEFAULT_REGION",
                             "AWS_ENDPOINT_URL",
                             "AWS_ENDPOINT_URL_S3",
                             "AWS_ENDPOINT_URL_STS",
                             "AWS_CONFIG_FILE",
                             "AWS_SHARED_CREDENTIALS_FILE",
                             "AWS_WEB_IDENTITY_TOKEN_FILE",
                             "AWS_ROLE_ARN",
                             "AWS_ROLE_SESSION_NAME",
                             "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                             "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
                             "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"}) {
      env_.Unset(name);
    }
    env_.Set("HOME", tmp_ / "home");
    env_.Set("AWS_EC2_METADATA_DISABLED", "true");   // Imds() turns it on, at the loopback fake
    env_.Set("AWS_METADATA_SERVICE_TIMEOUT", "10");  // a loaded test machine, not EC2's 1 s
    WriteFile(tmp_ / "token", kWebToken);
  }

  // Starts both servers; `lifetime_s`: of the credentials the identity server issues.
  void StartServers(double lifetime_s = 3600, std::vector<std::string> http_extra = {}) {
    auto identity = StartIdentityServer(
        tmp_ / "id", {"--lifetime", std::to_string(lifetime_s), "--role-arn", kRoleArn,
                      "--web-identity-token", kWebToken, "--container-token", kContainerToken});
    ASSERT_TRUE(identity.ok()) << identity.status().ToString();
    identity_ = std::move(*identity);
    std::vector<std::string> args = {
        "--sigv4",        "ENVKEY:env-secret",      "--sigv4", "PROFILEKEY:profile-secret",
        "--sigv4-issued", tmp_ / "id/issued.jsonl", "--log",   log()};
    args.insert(args.end(), http_extra.begin(), http_extra.end());
    auto http = StartHttpServer(tmp_ / "www", args);
    ASSERT_TRUE(http.ok()) << http.status().ToString();
    http_ = std::move(*http);
  }

  void Env() {
    env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
    env_.Set("AWS_SECRET_ACCESS_KEY", "env-secret");
  }
  void WebIdentity() {
    env_.Set("AWS_WEB_IDENTITY_TOKEN_FILE", tmp_ / "token");
    env_.Set("AWS_ROLE_ARN", kRoleArn);
    env_.Set("AWS_ROLE_SESSION_NAME", "mmpack-test-session");
    env_.Set("AWS_ENDPOINT_URL_STS", identity_->url());
  }
  void Profile() {
    WriteFile(tmp_ / "home/.aws/credentials",
              "[default]\naws_access_key_id = PROFILEKEY\naws_secret_access_key = "
              "profile-secret\n");
  }
  void Imds() {
    env_.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", identity_->url());
    env_.Unset("AWS_EC2_METADATA_DISABLED");
  }

  // Opens s3://bkt/coco through a fresh cache and reads its first shard. Returns the status;
  // `keys` receives the keys that signed its requests.
  Status Read(std::set<std::string>* keys = nullptr) {
    std::filesystem::remove(log());
    env_.Set("AWS_ENDPOINT_URL", http_->url());
    auto set = ShardSet::Open("s3://bkt/coco",
                              testing::CacheOptions(tmp_ / ("c" + std::to_string(reads_++))));
    Status st = set.ok() ? (*set)->PinShard(0).status() : set.status();
    if (keys) *keys = KeysUsed(log());
    return st;
  }

  // Read, with what the chain wrote on stderr (the line naming the credentials' source) in *err.
  Status ReadSaying(std::set<std::string>* keys, std::string* err) {
    ::testing::internal::CaptureStderr();
    Status st = Read(keys);
    *err = ::testing::internal::GetCapturedStderr();
    return st;
  }

  std::string log() const { return tmp_ / "requests.log"; }
  std::string identity_log() const { return tmp_ / "id/identity.log"; }

  TempDir tmp_{"mm_creds"};
  ScopedEnv env_;
  std::unique_ptr<ServerProcess> identity_, http_;
  int reads_ = 0;
};

TEST_F(CredentialChain, EnvironmentKeysSignEveryRequest) {
  StartServers();
  Env();
  std::set<std::string> keys;
  std::string err;
  ASSERT_TRUE(ReadSaying(&keys, &err).ok());
  EXPECT_EQ(keys, std::set<std::string>({"ENVKEY"}));
  EXPECT_NE(err.find("mmpack: S3 credentials: environment (AWS_ACCESS_KEY_ID)\n"),
            std::string::npos)
      << err;
}

TEST_F(CredentialChain, ProfileGivesKeysRegionAndEndpointFromTheSharedFiles) {
  StartServers();
  // AWS_PROFILE with both files named by their variables; the endpoint nested under "s3 =".
  env_.Set("AWS_PROFILE", "dev");
  env_.Set("AWS_SHARED_CREDENTIALS_FILE", tmp_ / "creds.ini");
  env_.Set("AWS_CONFIG_FILE", tmp_ / "config.ini");
  WriteFile(tmp_ / "creds.ini",
            "# written by aws configure\n[default]\naws_access_key_id = ENVKEY\n"
            "aws_secret_access_key = env-secret\n\n[dev]\naws_access_key_id = PROFILEKEY\n"
            "aws_secret_access_key = profile-secret\n");
  WriteFile(tmp_ / "config.ini",
            "[default]\nregion = us-west-2\n\n[profile dev]\n"
            "region = eu-north-1\ns3 =\n  endpoint_url = " +
                http_->url() + "\n  addressing_style = path\n");
  const internal::S3Settings settings = internal::S3Settings::FromEnvironment();
  EXPECT_EQ(settings.region, "eu-north-1");
  EXPECT_EQ(settings.endpoint, http_->url());
  ::testing::internal::CaptureStderr();
  auto set = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp_ / "c"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_TRUE((*set)->PinShard(1).ok());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(KeysUsed(log()), std::set<std::string>({"PROFILEKEY"}));
  EXPECT_NE(err.find("S3 credentials: profile 'dev' (" + tmp_ / "creds.ini" + ")"),
            std::string::npos)
      << err;
  // The credentials file's keys win over the config file's; without them, the config's.
  WriteFile(tmp_ / "config.ini",
            "[profile dev]\naws_access_key_id = ENVKEY\n"
            "aws_secret_access_key = env-secret\n");
  std::set<std::string> keys;
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"PROFILEKEY"}));
  WriteFile(tmp_ / "creds.ini", "[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"ENVKEY"}));
}

// A profile holding temporary keys (what `aws configure export-credentials` or an SSO helper
// writes): the session token, 1,200 characters, outlasts inih's 200-byte lines and must reach
// the server whole as x-amz-security-token.
TEST_F(CredentialChain, AProfilesSessionTokenIsSentWhole) {
  StartServers();
  const std::string token(1200, 'Q');
  std::ofstream(tmp_ / "id/issued.jsonl", std::ios::app)
      << R"({"key": "PROFTMP", "secret": "tmp-secret", "token": ")" << token
      << R"(", "expires": 4102444800})"
      << "\n";
  WriteFile(tmp_ / "home/.aws/credentials",
            "[default]\naws_access_key_id = PROFTMP\naws_secret_access_key = tmp-secret\n"
            "aws_session_token = " +
                token + "\n");
  std::set<std::string> keys;
  Status st = Read(&keys);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(keys, std::set<std::string>({"PROFTMP"}));
}

TEST_F(CredentialChain, DefaultProfileIsReadFromHome) {
  StartServers();
  Profile();
  std::set<std::string> keys;
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"PROFILEKEY"}));
}

TEST_F(CredentialChain, AProfileThatDoesNotExistIsAnErrorNamingIt) {
  env_.Set("AWS_PROFILE", "nosuch");
  env_.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:9");  // never asked
  auto r = ShardSet::Open("s3://bkt/coco");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("the profile 'nosuch' (AWS_PROFILE) is in neither"),
            std::string::npos)
      << r.status().ToString();
  // A local set does not read the AWS settings at all.
  const std::string local = CocoSet(testing::SmallShards());
  EXPECT_TRUE(ShardSet::Open(local).ok());
}

TEST_F(CredentialChain, AProfileThroughAnUnimplementedSourceSaysWhatToDo) {
  env_.Set("AWS_PROFILE", "sso");
  env_.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
  env_.Set("AWS_EC2_METADATA_DISABLED", "true");
  WriteFile(tmp_ / "home/.aws/config", "[profile sso]\nsso_session = corp\nregion = eu-west-1\n");
  auto r = ShardSet::Open("s3://bkt/coco");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sso_session, which mmpack does not implement"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("aws configure export-credentials --profile sso"),
            std::string::npos);
}

TEST_F(CredentialChain, WebIdentityAssumesTheRoleThroughSts) {
  StartServers();
  WebIdentity();
  std::set<std::string> keys;
  std::string err;
  Status st = ReadSaying(&keys, &err);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(keys, std::set<std::string>({"STS-1"}));
  EXPECT_EQ(CountLogLines(identity_log(), "POST / 200 STS-1 mmpack-test-session"), 1);
  EXPECT_NE(err.find("S3 credentials: web identity (role " + std::string(kRoleArn)),
            std::string::npos)
      << err;
  // A token STS does not accept: the error names STS's URL and its code.
  WriteFile(tmp_ / "token", "not-the-token");
  env_.Set("AWS_ROLE_SESSION_NAME", "second");  // another configuration: resolved anew
  st = Read();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("POST " + identity_->url() + "/: HTTP 400 (InvalidIdentityToken"),
            std::string::npos)
      << st.ToString();
}

// EKS-style web identity configured in a profile (web_identity_token_file + role_arn in
// ~/.aws/config) rather than in the environment.
TEST_F(CredentialChain, AProfilesWebIdentityAssumesItsRole) {
  StartServers();
  env_.Set("AWS_PROFILE", "ci");
  env_.Set("AWS_ENDPOINT_URL_STS", identity_->url());
  WriteFile(tmp_ / "home/.aws/config", "[profile ci]\nweb_identity_token_file = " + tmp_ / "token" +
                                           "\nrole_arn = " + kRoleArn +
                                           "\nrole_session_name = mmpack-test-session\n");
  std::set<std::string> keys;
  std::string err;
  Status st = ReadSaying(&keys, &err);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(keys, std::set<std::string>({"STS-1"}));
  EXPECT_EQ(CountLogLines(identity_log(), "POST / 200 STS-1 mmpack-test-session"), 1);
  EXPECT_NE(err.find("web identity (role " + std::string(kRoleArn) + ", token file " +
                     tmp_ / "token" + ", profile 'ci'"),
            std::string::npos)
      << err;
  // Without role_arn: an error naming the profile's file, not a silent unsigned request.
  WriteFile(tmp_ / "home/.aws/config",
            "[profile ci]\nweb_identity_token_file = " + tmp_ / "token" + "\n");
  st = Read();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has web_identity_token_file but no role_arn"), std::string::npos)
      << st.ToString();
}

// ECS tasks and EKS Pod Identity: the container credentials endpoint, its token read from the
// file the agent keeps; after the profile, before the instance metadata service.
TEST_F(CredentialChain, ContainerCredentialsComeFromTheEndpointWithItsToken) {
  StartServers();
  const std::string uri = identity_->url() + "/container/credentials";
  env_.Set("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri);
  WriteFile(tmp_ / "pod-token", std::string(kContainerToken) + "\n");
  env_.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tmp_ / "pod-token");
  Imds();  // not asked: the container's credentials come first
  std::set<std::string> keys;
  std::string err;
  Status st = ReadSaying(&keys, &err);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(keys, std::set<std::string>({"ECS-1"}));
  EXPECT_EQ(CountLogLines(identity_log(), "GET /container/credentials 200 ECS-1"), 1);
  EXPECT_EQ(CountLogLines(identity_log(), "/latest/"), 0);
  EXPECT_NE(err.find("S3 credentials: container credentials (" + uri + ")"), std::string::npos)
      << err;
  // A wrong token: the endpoint's 401, naming it.
  env_.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong");
  st = Read();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("GET " + uri + ": HTTP 401"), std::string::npos) << st.ToString();
  // The profile's keys come before it.
  env_.Unset("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  Profile();
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"PROFILEKEY"}));
}

TEST_F(CredentialChain, InstanceMetadataGivesTheRoleCredentialsWithIMDSv2) {
  StartServers();
  Imds();
  std::set<std::string> keys;
  std::string err;
  Status st = ReadSaying(&keys, &err);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(keys, std::set<std::string>({"IMDS-1"}));
  EXPECT_EQ(CountLogLines(identity_log(), "PUT /latest/api/token 200 token"), 1);
  EXPECT_EQ(CountLogLines(identity_log(), "/security-credentials/ 200 role"), 1);
  EXPECT_EQ(CountLogLines(identity_log(), "/security-credentials/mmpack-test-role 200 IMDS-1"), 1);
  EXPECT_EQ(CountLogLines(identity_log(), " 401 "), 0);  // every GET carried the token
  EXPECT_NE(err.find("S3 credentials: instance metadata (IMDSv2 role 'mmpack-test-role' at " +
                     identity_->url() + ")"),
            std::string::npos)
      << err;
}

TEST_F(CredentialChain, SourcesTakePrecedenceInTheSdkOrder) {
  StartServers();
  Env();
  WebIdentity();
  Profile();
  Imds();
  std::set<std::string> keys;
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"ENVKEY"}));
  env_.Unset("AWS_ACCESS_KEY_ID");
  env_.Unset("AWS_SECRET_ACCESS_KEY");
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"STS-1"}));
  env_.Unset("AWS_WEB_IDENTITY_TOKEN_FILE");
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"PROFILEKEY"}));
  std::filesystem::remove(tmp_ / "home/.aws/credentials");
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"IMDS-1"}));
  // Nothing left: unsigned, said once however many sets are opened; this server refuses.
  env_.Set("AWS_EC2_METADATA_DISABLED", "true");
  ::testing::internal::CaptureStderr();
  Status first = Read(&keys), second = Read();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.message().find("no AWS Signature Version 4 Authorization header"),
            std::string::npos)
      << first.ToString();
  EXPECT_TRUE(keys.empty());
  size_t said = 0;
  for (size_t at = err.find("no credentials found: unsigned requests"); at != std::string::npos;
       at = err.find("no credentials found: unsigned requests", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << err;
  EXPECT_FALSE(second.ok());
}

TEST_F(CredentialChain, DisabledMetadataServiceIsNeverAsked) {
  StartServers();
  Imds();
  env_.Set("AWS_EC2_METADATA_DISABLED", "true");
  ::testing::internal::CaptureStderr();
  Status st = Read();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(CountLogLines(identity_log(), "/latest/"), 0);
  EXPECT_NE(err.find("the instance metadata service is off: AWS_EC2_METADATA_DISABLED=true"),
            std::string::npos)
      << err;
  // Not "true": asked.
  env_.Set("AWS_EC2_METADATA_DISABLED", "false");
  std::set<std::string> keys;
  ASSERT_TRUE(Read(&keys).ok());
  EXPECT_EQ(keys, std::set<std::string>({"IMDS-1"}));
}

// Credentials that live 3 s, a read of 5 shards each held 0.7 s by the server: the keys expire
// during the read, and S3 (here http_server.py) refuses expired ones with 400 ExpiredToken. The
// provider fetches new ones before that, so every request succeeds and several keys sign.
TEST_F(CredentialChain, TemporaryCredentialsAreRefreshedBeforeTheyExpireMidRead) {
  StartServers(/*lifetime_s=*/3, {"--delay", "*.h5:0.7"});
  for (const std::string source : {"IMDS", "STS"}) {
    if (source == "IMDS") {
      Imds();
    } else {
      env_.Unset("AWS_EC2_METADATA_SERVICE_ENDPOINT");
      WebIdentity();
    }
    std::filesystem::remove(log());
    env_.Set("AWS_ENDPOINT_URL", http_->url());
    auto set = ShardSet::Open("s3://bkt/coco", testing::CacheOptions(tmp_ / ("r" + source)));
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    const auto begin = std::chrono::steady_clock::now();
    for (size_t k = 0; k < (*set)->num_shards(); ++k) {
      auto pin = (*set)->PinShard(k);
      ASSERT_TRUE(pin.ok()) << source << " shard " << k << ": " << pin.status().ToString();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    ASSERT_GT(seconds, 3.0) << "the read must outlast one key";
    const std::set<std::string> keys = KeysUsed(log());
    EXPECT_GE(keys.size(), 2u) << source;
    for (const std::string& key : keys) EXPECT_EQ(key.rfind(source + "-", 0), 0u) << key;
    EXPECT_EQ(CountLogLines(log(), "ExpiredToken"), 0);
  }
}

TEST(IniFile, ReadsAwsFilesWithLongValuesNestedKeysAndComments) {
  const std::string token(1500, 'T');  // an STS session token: over inih's 200-byte lines
  const std::string text =
      "\xEF\xBB\xBF# comment\n; another\n[default]\naws_access_key_id = AKID\n"
      "aws_session_token = " +
      token +
      "  \n\n[profile dev]\nregion=eu-west-1\ns3 =\n  endpoint_url = http://h:1\n"
      "  addressing_style = path\nsts =\n    endpoint_url = http://sts:2\n"
      "output = json\n[default]\nregion = us-east-2\n";
  auto ini = internal::ParseIni(text, "config");
  ASSERT_TRUE(ini.ok()) << ini.status().ToString();
  EXPECT_EQ(*ini->Find("default", "aws_access_key_id"), "AKID");
  EXPECT_EQ(*ini->Find("default", "aws_session_token"), token);
  EXPECT_EQ(*ini->Find("default", "region"), "us-east-2");  // a section given twice
  EXPECT_EQ(*ini->Find("profile dev", "region"), "eu-west-1");
  EXPECT_EQ(*ini->Find("profile dev", "s3.endpoint_url"), "http://h:1");
  EXPECT_EQ(*ini->Find("profile dev", "s3.addressing_style"), "path");
  EXPECT_EQ(*ini->Find("profile dev", "sts.endpoint_url"), "http://sts:2");
  EXPECT_EQ(*ini->Find("profile dev", "output"), "json");
  EXPECT_EQ(ini->Find("profile dev", "aws_session_token"), nullptr);
  // A long continuation line too.
  auto nested = internal::ParseIni("[p]\ns3 =\n  endpoint_url = http://" + token + "\n", "f");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(*nested->Find("p", "s3.endpoint_url"), "http://" + token);
}

TEST(IniFile, MalformedLinesAreErrorsNamingFileAndLine) {
  auto bad = internal::ParseIni("[default]\naws_access_key_id = A\nthis is not ini\n", "creds");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("creds line 3"), std::string::npos)
      << bad.status().ToString();
  auto long_junk = internal::ParseIni("[d]\n" + std::string(500, 'x') + "\n", "creds");
  ASSERT_FALSE(long_junk.ok());
  EXPECT_NE(long_junk.status().message().find("creds line 2"), std::string::npos)
      << long_junk.status().ToString();
  EXPECT_TRUE(internal::ReadIniFile("/nonexistent/credentials").status().IsNotFound());
}

TEST(Credentials, ExpirationTimesParseAsUtc) {
  auto t = internal::ParseIso8601("2024-05-01T12:00:00Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1714564800);
  auto fractional = internal::ParseIso8601("2024-05-01T12:00:00.123Z");
  ASSERT_TRUE(fractional.ok());
  EXPECT_EQ(*fractional, *t);
  EXPECT_FALSE(internal::ParseIso8601("May 1st").ok());
  EXPECT_FALSE(internal::ParseIso8601("2024-05-01T12:00:00+02:00").ok());
}

}  // namespace
}  // namespace mm::reader
