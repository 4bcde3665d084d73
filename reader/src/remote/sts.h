// sts.h: temporary credentials for a role from a web identity token (Kubernetes' projected
// service account token on EKS: IRSA), through STS AssumeRoleWithWebIdentity (AWS STS API
// reference). Private to mm_reader.
//
//   POST ENDPOINT/   Content-Type: application/x-www-form-urlencoded, unsigned:
//   Action=AssumeRoleWithWebIdentity&RoleArn=R&RoleSessionName=S&Version=2011-06-15
//   &WebIdentityToken=T
//   -> <AssumeRoleWithWebIdentityResponse>...<Credentials><AccessKeyId>, <SecretAccessKey>,
//      <SessionToken>, <Expiration>
// The token file is read again at each call (the kubelet rotates it).
//
// Thread-safe: each call uses its own HTTP client.
#pragma once

#include <string>

#include "mm/status.h"
#include "remote/credentials.h"

namespace mm::reader::internal {

struct WebIdentity {
  std::string role_arn;
  std::string token_file;
  std::string session_name;  // empty: "mmpack-<unix milliseconds>", as botocore names its own
  std::string endpoint;      // STS: "https://sts.us-east-1.amazonaws.com" (no trailing '/')
};

/// Errors: NotFound / IOError (the token file), IOError (STS refused, naming the URL and STS's
/// error code, e.g. "HTTP 400 (InvalidIdentityToken: ...)"), Corruption (an answer without
/// credentials).
Result<AwsCredentials> AssumeRoleWithWebIdentity(const WebIdentity& identity);

}  // namespace mm::reader::internal
