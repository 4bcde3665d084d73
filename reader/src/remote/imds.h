// imds.h: an EC2 instance role's temporary credentials from the instance metadata service,
// IMDSv2 (AWS's "Use the Instance Metadata Service to access instance metadata"). Private to
// mm_reader.
//
//   PUT  ENDPOINT/latest/api/token                      X-aws-ec2-metadata-token-ttl-seconds: 21600
//   GET  ENDPOINT/latest/meta-data/iam/security-credentials/        X-aws-ec2-metadata-token: T
//        -> the role's name (first line)
//   GET  ENDPOINT/latest/meta-data/iam/security-credentials/ROLE    (same header)
//        -> {"Code": "Success", "AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
// IMDSv1 (the same GETs without a token) is not tried: instances that require v2 refuse it, and
// the SDKs fall back to it only for old instances.
//
// Thread-safe: each call uses its own HTTP client.
#pragma once

#include <string>

#include "mm/status.h"
#include "remote/credentials.h"

namespace mm::reader::internal {

struct ImdsOptions {
  std::string endpoint = "http://169.254.169.254";  // no trailing '/'
  int timeout_ms = 1000;                            // per request, connecting included
  int attempts = 1;
};

/// The role's credentials; `role` receives its name.
/// Errors: IOError (the service did not answer: not on EC2; HTTP errors, naming the URL),
/// NotFound (no role attached: an empty list or 404), Corruption (an answer that is not the
/// documented JSON, or whose Code is not "Success").
Result<AwsCredentials> FetchImdsCredentials(const ImdsOptions& options, std::string* role);

}  // namespace mm::reader::internal
