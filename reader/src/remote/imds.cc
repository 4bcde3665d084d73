// imds.cc: see imds.h.
#include "remote/imds.h"

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
  return CredentialsFromJson(text, get.url, /*want_code=*/true);
}

}  // namespace mm::reader::internal
