// aws_config.h: what AWS's tools read from the environment and from the shared files
// (~/.aws/credentials, ~/.aws/config) for the S3 requests of s3:// sets: the profile, its keys,
// region and endpoint, a web identity, the instance metadata service's settings. Read as the
// AWS CLI and SDKs read them (the variables are theirs; the files parsed by ini_file.h).
// Private to mm_reader.
//
// Profile: AWS_PROFILE (else AWS_DEFAULT_PROFILE, else "default"), looked up in
// AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials) as [NAME] and in AWS_CONFIG_FILE (else
// ~/.aws/config) as [profile NAME] ([default] or [profile default] for the default profile).
// Keys of the credentials file win over the config file's. A profile named in AWS_PROFILE that
// neither file has is an error, as in the CLI ("The config profile (x) could not be found").
//
// Region: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region, else us-east-1.
// S3 endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the profile's "s3 =" nested
// endpoint_url, else its endpoint_url; empty: AWS itself. STS endpoint (web identity) the
// same way with _STS and "sts =", else https://sts.REGION.amazonaws.com.
//
// Thread-safe: FromEnvironment reads getenv and the files; the struct is a value.
#pragma once

#include <string>

namespace mm::reader::internal {

struct AwsConfig {
  // The environment's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
  std::string env_access_key_id, env_secret_access_key, env_session_token;

  // The profile and the files it was looked up in.
  std::string profile = "default";
  bool profile_explicit = false;  // named by AWS_PROFILE / AWS_DEFAULT_PROFILE
  bool profile_found = false;     // in either file
  std::string credentials_file, config_file;
  // Its keys, and the file they came from.
  std::string profile_access_key_id, profile_secret_access_key, profile_session_token;
  std::string profile_keys_file;
  // What the profile configures that mmpack does not implement (role_arn with source_profile,
  // credential_process, sso_*): the setting's name, for the error that says so.
  std::string profile_unsupported;

  // Web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME), else the
  // profile's web_identity_token_file + role_arn (+ role_session_name).
  std::string web_identity_token_file, role_arn, role_session_name;
  bool web_identity_from_env = false;

  std::string region = "us-east-1";
  std::string endpoint;      // S3; no trailing '/'; empty: AWS
  std::string sts_endpoint;  // no trailing '/'

  // Container credentials (ECS tasks, EKS Pod Identity; container_credentials.h):
  // AWS_CONTAINER_CREDENTIALS_FULL_URI, else http://169.254.170.2 +
  // AWS_CONTAINER_CREDENTIALS_RELATIVE_URI; "" when neither is set. The token:
  // AWS_CONTAINER_AUTHORIZATION_TOKEN, else the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE.
  std::string container_uri, container_token, container_token_file;

  // The instance metadata service (IMDSv2): AWS_EC2_METADATA_DISABLED=true turns it off;
  // AWS_EC2_METADATA_SERVICE_ENDPOINT (else AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6's
  // http://[fd00:ec2::254], else http://169.254.169.254); AWS_METADATA_SERVICE_TIMEOUT seconds
  // per request (default 1) and AWS_METADATA_SERVICE_NUM_ATTEMPTS (default 1), as botocore.
  bool imds_disabled = false;
  std::string imds_endpoint = "http://169.254.169.254";
  int imds_timeout_ms = 1000;
  int imds_attempts = 1;

  // A problem that makes every s3:// location fail, naming the variable or file (a key id
  // without its secret, a profile that does not exist, a file that does not parse); "" if none.
  std::string error;

  /// Reads the environment and the profile's files.
  static AwsConfig FromEnvironment();
  /// Everything above that decides where credentials come from, as one string: processes share
  /// one credential provider per distinct key (credentials.h).
  std::string Key() const;
};

}  // namespace mm::reader::internal
