// container_credentials.cc: see container_credentials.h.
#include "remote/container_credentials.h"

#include <cctype>

#include "mm/internal/file.h"
#include "remote/http.h"

namespace mm::reader::internal {

Result<AwsCredentials> FetchContainerCredentials(const ContainerEndpoint& endpoint) {
  std::string token = endpoint.token;
  if (token.empty() && !endpoint.token_file.empty()) {
    Status read = ReadRegularFile(endpoint.token_file, &token, 64 << 10);
    if (!read.ok()) return read.WithContext("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
  }
  RemoteOptions transport;
  transport.max_attempts = 2;
  transport.initial_backoff_ms = 100;
  HttpClient client;  // its own: this runs inside another request's try (http.cc Attempt)
  HttpRequest get;
  get.url = endpoint.uri;
  if (!token.empty()) get.headers = {"Authorization: " + token};
  get.timeout_ms = endpoint.timeout_ms;
  MM_ASSIGN_OR_RETURN(std::string text, client.Send(get, transport, "GET", "", 64 << 10));
  return CredentialsFromJson(text, get.url, /*want_code=*/false);
}

}  // namespace mm::reader::internal
