// container_credentials.h: a task's or pod's temporary credentials from the container
// credentials endpoint of ECS tasks and EKS Pod Identity (AWS SDKs' "Container credential
// provider"). Private to mm_reader.
//
//   GET URI    Authorization: TOKEN (when a token is configured)
//   -> {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
// URI: AWS_CONTAINER_CREDENTIALS_FULL_URI, else http://169.254.170.2 followed by
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (aws_config.h). TOKEN: AWS_CONTAINER_AUTHORIZATION_TOKEN,
// else the content of the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, read again at each call
// (EKS rotates it).
//
// Thread-safe: each call uses its own HTTP client.
#pragma once

#include <string>

#include "mm/status.h"
#include "remote/credentials.h"

namespace mm::reader::internal {

struct ContainerEndpoint {
  std::string uri;
  std::string token;       // sent as Authorization when not empty
  std::string token_file;  // read when `token` is empty
  int timeout_ms = 2000;
};

/// Errors: IOError (the endpoint; reading the token file), Corruption (an answer that is not
/// the documented JSON).
Result<AwsCredentials> FetchContainerCredentials(const ContainerEndpoint& endpoint);

}  // namespace mm::reader::internal
