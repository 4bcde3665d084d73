// sts.cc: see sts.h.
#include "remote/sts.h"

#include <chrono>

#include "mm/internal/file.h"
#include "remote/http.h"
#include "remote/location.h"

namespace mm::reader::internal {
namespace {

constexpr int64_t kMaxTokenBytes = 64 << 10;
constexpr int64_t kMaxAnswerBytes = 256 << 10;

// application/x-www-form-urlencoded value: RFC 3986 unreserved characters kept, the rest %XX.
std::string FormValue(const std::string& value) {
  std::string encoded = PercentEncodePath(value);
  std::string out;
  for (char c : encoded) {
    if (c == '/') {
      out += "%2F";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<AwsCredentials> AssumeRoleWithWebIdentity(const WebIdentity& identity) {
  std::string token;
  MM_RETURN_NOT_OK(ReadRegularFile(identity.token_file, &token, kMaxTokenBytes));
  token = Trimmed(token);
  if (token.empty()) return Status::InvalidArgument(identity.token_file + " is empty");
  std::string session = identity.session_name;
  if (session.empty()) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    session = "mmpack-" + std::to_string(ms.count());
  }
  const std::string body =
      "Action=AssumeRoleWithWebIdentity&RoleArn=" + FormValue(identity.role_arn) +
      "&RoleSessionName=" + FormValue(session) +
      "&Version=2011-06-15&WebIdentityToken=" + FormValue(token);
  HttpRequest request;
  request.url = identity.endpoint + "/";
  request.headers = {"Content-Type: application/x-www-form-urlencoded", "Accept: application/xml"};
  RemoteOptions transport;  // retries of 5xx and broken connections, as for shards
  transport.initial_backoff_ms = 100;
  transport.max_backoff_ms = 2000;
  HttpClient client;  // its own: this runs inside another request's try (http.cc Attempt)
  MM_ASSIGN_OR_RETURN(std::string answer,
                      client.Send(request, transport, "POST", body, kMaxAnswerBytes));
  AwsCredentials keys;
  keys.access_key_id = XmlElementText(answer, "AccessKeyId");
  keys.secret_access_key = XmlElementText(answer, "SecretAccessKey");
  keys.session_token = XmlElementText(answer, "SessionToken");
  if (keys.access_key_id.empty() || keys.secret_access_key.empty()) {
    return Status::Corruption("POST " + request.url +
                              ": the AssumeRoleWithWebIdentity answer holds no credentials");
  }
  const std::string expiration = XmlElementText(answer, "Expiration");
  if (!expiration.empty()) {
    MM_ASSIGN_OR_RETURN(keys.expiration, ParseIso8601(expiration));
  }
  return keys;
}

}  // namespace mm::reader::internal
