// imds.cc: see imds.h.
#include "remote/imds.h"

#include <nlohmann/json.hpp>

#include "remote/http.h"

namespace mm::reader::internal {
namespace {

constexpr int64_t kMaxAnswerBytes = 64 << 10;

}  // namespace

Result<AwsCredentials> FetchImdsCredentials(const ImdsOptions& options, std::string* role) {
  RemoteOptions transport;
  transport.max_attempts = options.attempts;
  transport.initial_backoff_ms = 100;
  transport.max_backoff_ms = 1000;
  HttpClient client;  // its own: this runs inside another request's try (http.cc Attempt)
  HttpRequest token_request;
  token_request.url = options.endpoint + "/latest/api/token";
  token_request.headers = {"X-aws-ec2-metadata-token-ttl-seconds: 21600"};
  token_request.timeout_ms = options.timeout_ms;
  MM_ASSIGN_OR_RETURN(std::string token,
                      client.Send(token_request, transport, "PUT", "", kMaxAnswerBytes));
  HttpRequest get;
  get.url = options.endpoint + "/latest/meta-data/iam/security-credentials/";
  get.headers = {"X-aws-ec2-metadata-token: " + token};
  get.timeout_ms = options.timeout_ms;
  MM_ASSIGN_OR_RETURN(std::string roles, client.Send(get, transport, "GET", "", kMaxAnswerBytes));
  *role = roles.substr(0, roles.find_first_of("\r\n"));
  if (role->empty()) return Status::NotFound(get.url + ": no instance role");
  get.url += *role;
  MM_ASSIGN_OR_RETURN(std::string text, client.Send(get, transport, "GET", "", kMaxAnswerBytes));
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto field = [&](const char* name) {
    return doc.is_object() && doc.contains(name) && doc[name].is_string()
               ? doc[name].get<std::string>()
               : std::string();
  };
  if (field("Code") != "Success" || field("AccessKeyId").empty() ||
      field("SecretAccessKey").empty()) {
    return Status::Corruption("GET " + get.url + ": not credentials (Code '" + field("Code") +
                              "')");
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
