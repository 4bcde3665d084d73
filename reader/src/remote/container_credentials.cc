// container_credentials.cc: see container_credentials.h.
#include "remote/container_credentials.h"

#include <cctype>
#include <nlohmann/json.hpp>

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
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto field = [&](const char* name) {
    return doc.is_object() && doc.contains(name) && doc[name].is_string()
               ? doc[name].get<std::string>()
               : std::string();
  };
  if (field("AccessKeyId").empty() || field("SecretAccessKey").empty()) {
    return Status::Corruption("GET " + get.url +
                              ": the answer holds no AccessKeyId and "
                              "SecretAccessKey");
  }
  AwsCredentials keys;
  keys.access_key_id = field("AccessKeyId");
  keys.secret_access_key = field("SecretAccessKey");
  keys.session_token = field("Token");
  if (!field("Expiration").empty()) {
    MM_ASSIGN_OR_RETURN(keys.expiration, ParseIso8601(field("Expiration")));
  }
  return keys;
}

}  // namespace mm::reader::internal
