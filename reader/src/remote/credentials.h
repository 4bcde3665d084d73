// credentials.h: the keys S3 requests are signed with, and where they come from. Private to
// mm_reader.
//
// AWS's chain (s3:// sets), resolved on the first signed request, in the order of the AWS SDKs
// (Go and Java v2, botocore, the CLI's "Configuration settings and precedence"):
//   1. the environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   2. web identity from the environment: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (EKS's
//      IRSA), through STS AssumeRoleWithWebIdentity (sts.h);
//   3. the profile (aws_config.h): its keys in ~/.aws/credentials or ~/.aws/config, else its
//      web_identity_token_file + role_arn;
//   4. container credentials (ECS tasks, EKS Pod Identity: container_credentials.h), when
//      AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI is set;
//   5. the instance metadata service, IMDSv2 (imds.h), unless AWS_EC2_METADATA_DISABLED=true;
//   6. none: requests go unsigned (public buckets).
// The SDKs put web identity from the environment before the profile (a pod with IRSA and a
// stray ~/.aws/credentials uses the role), and so does this. A profile that configures what is
// not implemented here (source_profile, credential_process, SSO) and has no keys is an error
// naming the setting.
//
// One line on stderr says which source was used, once per process and configuration:
//   mmpack: S3 credentials: environment (AWS_ACCESS_KEY_ID)
//   mmpack: S3 credentials: profile 'dev' (/home/u/.aws/credentials)
//   mmpack: S3 credentials: web identity (role arn:aws:iam::1:role/r, token file /var/run/t)
//   mmpack: S3 credentials: container credentials (http://169.254.170.23/v1/credentials)
//   mmpack: S3 credentials: instance metadata (IMDSv2 role 'r' at http://169.254.169.254)
//   mmpack: S3 credentials: no credentials found: unsigned requests (tried: ...)
//
// Temporary credentials (web identity, instance metadata) are fetched again before they expire:
// when less than min(5 minutes, half their lifetime as fetched) is left (the SDKs refresh 5 to
// 15 minutes ahead; half the lifetime keeps short-lived ones, as in tests, from being fetched
// for every request). A refresh that fails while the old keys are still valid keeps them (and
// tries again at most every 5 s); once they have expired, the request fails with the error.
//
// Thread-safe: Get() may be called from any thread; refreshes happen under the provider's
// mutex. Fork: a child process starts with every provider's mutex unlocked (pthread_atfork).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "mm/status.h"
#include "remote/aws_config.h"

namespace mm::reader::internal {

struct AwsCredentials {
  std::string access_key_id, secret_access_key, session_token;
  /// When temporary credentials expire; the epoch (the default) for keys that do not.
  std::chrono::system_clock::time_point expiration{};
  bool expires() const { return expiration != std::chrono::system_clock::time_point{}; }
};

/// Where a resolved chain gets its keys: fixed ones, or a fetch of temporary ones.
struct CredentialSource {
  std::string description;                        // the stderr line's text after "credentials: "
  std::shared_ptr<const AwsCredentials> fixed;    // null with no fetch: unsigned
  std::function<Result<AwsCredentials>()> fetch;  // temporary credentials
};

class CredentialProvider {
 public:
  /// `label` names the service in the stderr line ("S3", "GCS"); `resolve` decides the source
  /// on the first Get.
  CredentialProvider(std::string label, std::function<Result<CredentialSource>()> resolve);
  ~CredentialProvider();
  CredentialProvider(const CredentialProvider&) = delete;
  CredentialProvider& operator=(const CredentialProvider&) = delete;

  /// Fixed keys (said once as `description`).
  static std::shared_ptr<CredentialProvider> Fixed(std::string label, AwsCredentials keys,
                                                   std::string description);
  /// No keys: "no credentials found: unsigned requests (`why`)".
  static std::shared_ptr<CredentialProvider> Unsigned(std::string label, std::string why);
  /// The process's provider for AWS's chain under `config` (one per distinct config.Key()).
  static std::shared_ptr<CredentialProvider> AwsChain(const AwsConfig& config);

  /// The keys to sign a request with now; nullptr: send it unsigned. The first call resolves
  /// the source and prints its line. Errors: those of the source (IOError naming the STS or
  /// metadata URL, InvalidArgument naming a profile setting), with what was being fetched.
  Result<std::shared_ptr<const AwsCredentials>> Get();

 private:
  bool NeedsRefresh(std::chrono::system_clock::time_point now) const;
  static void ResetAfterFork();

  const std::string label_;
  std::function<Result<CredentialSource>()> resolve_;
  std::mutex mu_;  // everything below
  bool resolved_ = false;
  CredentialSource source_;
  std::shared_ptr<const AwsCredentials> current_;
  std::chrono::system_clock::time_point fetched_at_{};
  std::chrono::steady_clock::time_point last_failure_{};
  bool failed_before_ = false;
};

/// "2024-05-01T12:00:00Z" (also with fractional seconds) as a time point.
/// Errors: InvalidArgument.
Result<std::chrono::system_clock::time_point> ParseIso8601(const std::string& text);

/// The keys of a credentials endpoint's JSON answer, the shape IMDS and the ECS/EKS container
/// endpoint share: {"AccessKeyId", "SecretAccessKey", "Token", "Expiration" (ISO 8601)}; with
/// want_code, also "Code": "Success" (IMDS). `url` names the answer in errors.
/// Errors: Corruption (not JSON, no keys, another Code), InvalidArgument (Expiration).
Result<AwsCredentials> CredentialsFromJson(const std::string& text, const std::string& url,
                                           bool want_code);

}  // namespace mm::reader::internal
