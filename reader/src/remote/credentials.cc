// credentials.cc: see credentials.h.
#include "remote/credentials.h"

#include <pthread.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <vector>

#include "remote/container_credentials.h"
#include "remote/imds.h"
#include "remote/sts.h"

namespace mm::reader::internal {
namespace {

using SystemClock = std::chrono::system_clock;

constexpr auto kMaxRefreshMargin = std::chrono::minutes(5);
constexpr auto kRetryAfterFailure = std::chrono::seconds(5);

// Every provider of the process (AwsChain's are kept for the process's life; Fixed and
// Unsigned ones register too, and leave with their destructor), for the fork handler.
std::mutex& RegistryMutex() {
  static auto* mu = new std::mutex();  // never destroyed: used by the fork handler at exit
  return *mu;
}
std::vector<CredentialProvider*>& Registry() {
  static auto* all = new std::vector<CredentialProvider*>();
  return *all;
}

// The chain of credentials.h, decided from `c`. Runs on the first Get.
Result<CredentialSource> ResolveAwsChain(const AwsConfig& c) {
  CredentialSource source;
  auto fixed = [](std::string id, std::string secret, std::string token) {
    auto keys = std::make_shared<AwsCredentials>();
    keys->access_key_id = std::move(id);
    keys->secret_access_key = std::move(secret);
    keys->session_token = std::move(token);
    return std::shared_ptr<const AwsCredentials>(std::move(keys));
  };
  if (!c.env_access_key_id.empty()) {
    source.description = "environment (AWS_ACCESS_KEY_ID)";
    source.fixed = fixed(c.env_access_key_id, c.env_secret_access_key, c.env_session_token);
    return source;
  }
  auto web_identity = [&](const std::string& from) {
    WebIdentity identity{c.role_arn, c.web_identity_token_file, c.role_session_name,
                         c.sts_endpoint};
    source.description = "web identity (role " + c.role_arn + ", token file " +
                         c.web_identity_token_file + ", " + from + ", STS " + c.sts_endpoint + ")";
    source.fetch = [identity] { return AssumeRoleWithWebIdentity(identity); };
    return source;
  };
  if (c.web_identity_from_env) return web_identity("AWS_WEB_IDENTITY_TOKEN_FILE");
  if (!c.profile_access_key_id.empty()) {
    source.description = "profile '" + c.profile + "' (" + c.profile_keys_file + ")";
    source.fixed =
        fixed(c.profile_access_key_id, c.profile_secret_access_key, c.profile_session_token);
    return source;
  }
  if (!c.web_identity_token_file.empty()) {
    if (c.role_arn.empty()) {
      return Status::InvalidArgument("profile '" + c.profile + "' in " + c.config_file +
                                     " has web_identity_token_file but no role_arn");
    }
    return web_identity("profile '" + c.profile + "'");
  }
  if (!c.profile_unsupported.empty()) {
    return Status::InvalidArgument(
        "profile '" + c.profile + "' gets its credentials through " + c.profile_unsupported +
        ", which mmpack does not implement: export them first, e.g. eval \"$(aws configure "
        "export-credentials --profile " +
        c.profile + " --format env)\"");
  }
  if (!c.container_uri.empty()) {
    const ContainerEndpoint endpoint{c.container_uri, c.container_token, c.container_token_file};
    source.description = "container credentials (" + c.container_uri + ")";
    source.fetch = [endpoint] { return FetchContainerCredentials(endpoint); };
    return source;
  }
  std::string tried = "the environment, web identity, profile '" + c.profile + "'";
  if (c.imds_disabled) {
    tried += "; the instance metadata service is off: AWS_EC2_METADATA_DISABLED=true";
  } else {
    ImdsOptions imds{c.imds_endpoint, c.imds_timeout_ms, c.imds_attempts};
    std::string role;
    Result<AwsCredentials> first = FetchImdsCredentials(imds, &role);
    if (first.ok()) {
      auto initial = std::make_shared<AwsCredentials>(std::move(*first));
      source.description =
          "instance metadata (IMDSv2 role '" + role + "' at " + c.imds_endpoint + ")";
      source.fixed = std::move(initial);  // the first keys; fetch refreshes them
      source.fetch = [imds] {
        std::string again;
        return FetchImdsCredentials(imds, &again);
      };
      return source;
    }
    tried += ", instance metadata at " + c.imds_endpoint + " (" + first.status().message() + ")";
  }
  source.description = "no credentials found: unsigned requests (tried " + tried + ")";
  return source;
}

}  // namespace

Result<SystemClock::time_point> ParseIso8601(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return Status::InvalidArgument("'" + text + "' is not an ISO 8601 UTC time");
  }
  std::string rest = text.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest[0] == '.') rest.erase(0, rest.find_first_not_of("0123456789", 1));
  if (rest != "Z" && rest != "+00:00") {
    return Status::InvalidArgument("'" + text + "' is not an ISO 8601 UTC time");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t seconds = timegm(&tm);
  if (seconds == static_cast<time_t>(-1)) {
    return Status::InvalidArgument("'" + text + "' is out of range");
  }
  return SystemClock::from_time_t(seconds);
}

Result<AwsCredentials> CredentialsFromJson(const std::string& text, const std::string& url,
                                           bool want_code) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto field = [&](const char* name) {
    return doc.is_object() && doc.contains(name) && doc[name].is_string()
               ? doc[name].get<std::string>()
               : std::string();
  };
  if (want_code && field("Code") != "Success") {
    return Status::Corruption("GET " + url + ": not credentials (Code '" + field("Code") + "')");
  }
  if (field("AccessKeyId").empty() || field("SecretAccessKey").empty()) {
    return Status::Corruption("GET " + url +
                              ": the answer holds no AccessKeyId and SecretAccessKey");
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

CredentialProvider::CredentialProvider(std::string label,
                                       std::function<Result<CredentialSource>()> resolve)
    : label_(std::move(label)), resolve_(std::move(resolve)) {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &CredentialProvider::ResetAfterFork);
    return true;
  }();
  (void)registered;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(this);
}

CredentialProvider::~CredentialProvider() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& all = Registry();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == this) {
      all.erase(all.begin() + static_cast<long>(i));
      break;
    }
  }
}

// In the child of a fork only the forking thread lives: a mutex another thread held (in a
// refresh) would stay locked for ever. Each is made anew, unlocked.
void CredentialProvider::ResetAfterFork() {
  new (&RegistryMutex()) std::mutex();
  for (CredentialProvider* p : Registry()) new (&p->mu_) std::mutex();
}

std::shared_ptr<CredentialProvider> CredentialProvider::Fixed(std::string label,
                                                              AwsCredentials keys,
                                                              std::string description) {
  auto shared = std::make_shared<const AwsCredentials>(std::move(keys));
  return std::make_shared<CredentialProvider>(std::move(label),
                                              [shared, description]() -> Result<CredentialSource> {
                                                CredentialSource source;
                                                source.description = description;
                                                source.fixed = shared;
                                                return source;
                                              });
}

std::shared_ptr<CredentialProvider> CredentialProvider::Unsigned(std::string label,
                                                                 std::string why) {
  return std::make_shared<CredentialProvider>(
      std::move(label), [why]() -> Result<CredentialSource> {
        CredentialSource source;
        source.description = "no credentials found: unsigned requests (" + why + ")";
        return source;
      });
}

std::shared_ptr<CredentialProvider> CredentialProvider::AwsChain(const AwsConfig& config) {
  static auto* chains = new std::map<std::string, std::shared_ptr<CredentialProvider>>();
  static std::mutex* mu = new std::mutex();
  const std::string key = config.Key();
  {
    std::lock_guard<std::mutex> lock(*mu);
    auto it = chains->find(key);
    if (it != chains->end()) return it->second;
  }
  auto provider = std::make_shared<CredentialProvider>(
      "S3", [config]() -> Result<CredentialSource> { return ResolveAwsChain(config); });
  std::lock_guard<std::mutex> lock(*mu);
  return chains->emplace(key, provider).first->second;
}

bool CredentialProvider::NeedsRefresh(SystemClock::time_point now) const {
  if (!source_.fetch) return false;
  if (!current_) return true;
  if (!current_->expires()) return false;
  const auto lifetime = current_->expiration - fetched_at_;
  const auto margin = std::min<SystemClock::duration>(kMaxRefreshMargin, lifetime / 2);
  return now >= current_->expiration - margin;
}

Result<std::shared_ptr<const AwsCredentials>> CredentialProvider::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!resolved_) {
    Result<CredentialSource> source = resolve_();
    if (!source.ok()) return source.status().WithContext(label_ + " credentials");
    source_ = std::move(*source);
    current_ = source_.fixed;
    fetched_at_ = SystemClock::now();
    resolved_ = true;
    std::fprintf(stderr, "mmpack: %s credentials: %s\n", label_.c_str(),
                 source_.description.c_str());
    std::fflush(stderr);
  }
  const auto now = SystemClock::now();
  if (!NeedsRefresh(now)) return current_;
  const bool still_valid = current_ && now < current_->expiration;
  if (still_valid && failed_before_ &&
      std::chrono::steady_clock::now() - last_failure_ < kRetryAfterFailure) {
    return current_;
  }
  Result<AwsCredentials> fresh = source_.fetch();
  if (!fresh.ok()) {
    failed_before_ = true;
    last_failure_ = std::chrono::steady_clock::now();
    if (still_valid) return current_;
    return fresh.status().WithContext(label_ + " credentials from " + source_.description);
  }
  failed_before_ = false;
  current_ = std::make_shared<const AwsCredentials>(std::move(*fresh));
  fetched_at_ = now;
  return current_;
}

}  // namespace mm::reader::internal
