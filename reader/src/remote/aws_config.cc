// aws_config.cc: see aws_config.h.
#include "remote/aws_config.h"

#include <cctype>
#include <cstdlib>

#include "remote/ini_file.h"

namespace mm::reader::internal {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string FirstEnv(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::string v = Env(name);
    if (!v.empty()) return v;
  }
  return "";
}

std::string NoTrailingSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "~/.aws/NAME" with HOME; "" without HOME.
std::string HomeFile(const char* name) {
  const std::string home = Env("HOME");
  return home.empty() ? std::string() : home + "/.aws/" + name;
}

// A positive integer from the environment, else `fallback`.
int PositiveEnv(const char* name, int fallback) {
  const std::string v = Env(name);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  return !v.empty() && *end == '\0' && n > 0 && n < 3600 ? static_cast<int>(n) : fallback;
}

// One shared file: missing is fine (an empty file); unreadable or malformed is config.error.
IniFile ReadShared(const std::string& path, AwsConfig* config) {
  if (path.empty()) return {};
  Result<IniFile> file = ReadIniFile(path);
  if (file.ok()) return std::move(*file);
  if (!file.status().IsNotFound() && config->error.empty()) {
    config->error = file.status().message();
  }
  return {};
}

// The profile's section of a file: `names` tried in order, the first present.
const std::map<std::string, std::string>* Section(const IniFile& file,
                                                  std::initializer_list<std::string> names) {
  for (const std::string& name : names) {
    auto it = file.sections.find(name);
    if (it != file.sections.end()) return &it->second;
  }
  return nullptr;
}

std::string Get(const std::map<std::string, std::string>* section, const std::string& key) {
  if (!section) return "";
  auto it = section->find(key);
  return it == section->end() ? std::string() : it->second;
}

void ReadProfile(AwsConfig* c) {
  const IniFile credentials = ReadShared(c->credentials_file, c);
  const IniFile config = ReadShared(c->config_file, c);
  const auto* cred = Section(credentials, {c->profile});
  const auto* conf = c->profile == "default" ? Section(config, {"default", "profile default"})
                                             : Section(config, {"profile " + c->profile});
  c->profile_found = cred || conf;
  // Keys: the credentials file's, else the config file's (as the CLI).
  for (const auto& [section, file] :
       {std::make_pair(cred, c->credentials_file), std::make_pair(conf, c->config_file)}) {
    if (!Get(section, "aws_access_key_id").empty()) {
      c->profile_access_key_id = Get(section, "aws_access_key_id");
      c->profile_secret_access_key = Get(section, "aws_secret_access_key");
      c->profile_session_token = Get(section, "aws_session_token");
      c->profile_keys_file = file;
      break;
    }
  }
  if (!c->profile_access_key_id.empty() && c->profile_secret_access_key.empty() &&
      c->error.empty()) {
    c->error = "profile '" + c->profile + "' in " + c->profile_keys_file +
               " has aws_access_key_id but no aws_secret_access_key";
  }
  const std::string region = Get(conf, "region");
  if (!region.empty() && FirstEnv({"AWS_REGION", "AWS_DEFAULT_REGION"}).empty()) {
    c->region = region;
  }
  if (c->role_arn.empty() && !Get(conf, "web_identity_token_file").empty()) {
    c->web_identity_token_file = Get(conf, "web_identity_token_file");
    c->role_arn = Get(conf, "role_arn");
    c->role_session_name = Get(conf, "role_session_name");
  }
  for (const char* key : {"source_profile", "credential_source", "credential_process",
                          "sso_session", "sso_start_url", "login_session"}) {
    if (!Get(conf, key).empty() || !Get(cred, key).empty()) {
      c->profile_unsupported = key;
      break;
    }
  }
  const std::string global = Get(conf, "endpoint_url");
  if (c->endpoint.empty()) c->endpoint = NoTrailingSlash(Get(conf, "s3.endpoint_url"));
  if (c->endpoint.empty()) c->endpoint = NoTrailingSlash(global);
  if (c->sts_endpoint.empty()) c->sts_endpoint = NoTrailingSlash(Get(conf, "sts.endpoint_url"));
  if (c->sts_endpoint.empty()) c->sts_endpoint = NoTrailingSlash(global);
}

}  // namespace

AwsConfig AwsConfig::FromEnvironment() {
  AwsConfig c;
  c.env_access_key_id = Env("AWS_ACCESS_KEY_ID");
  c.env_secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  c.env_session_token = Env("AWS_SESSION_TOKEN");
  if (!c.env_access_key_id.empty() && c.env_secret_access_key.empty()) {
    // Signing with an empty secret only earns the server's SignatureDoesNotMatch.
    c.error =
        "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is empty or unset: set both (or "
        "neither, for a public bucket)";
  }
  const std::string profile = FirstEnv({"AWS_PROFILE", "AWS_DEFAULT_PROFILE"});
  c.profile_explicit = !profile.empty();
  if (c.profile_explicit) c.profile = profile;
  c.credentials_file = FirstEnv({"AWS_SHARED_CREDENTIALS_FILE"});
  if (c.credentials_file.empty()) c.credentials_file = HomeFile("credentials");
  c.config_file = FirstEnv({"AWS_CONFIG_FILE"});
  if (c.config_file.empty()) c.config_file = HomeFile("config");

  c.web_identity_token_file = Env("AWS_WEB_IDENTITY_TOKEN_FILE");
  c.role_arn = Env("AWS_ROLE_ARN");
  c.role_session_name = Env("AWS_ROLE_SESSION_NAME");
  c.web_identity_from_env = !c.web_identity_token_file.empty() && !c.role_arn.empty();
  if (!c.web_identity_from_env) c.web_identity_token_file = c.role_arn = c.role_session_name = "";

  const std::string region = FirstEnv({"AWS_REGION", "AWS_DEFAULT_REGION"});
  if (!region.empty()) c.region = region;
  c.endpoint = NoTrailingSlash(FirstEnv({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}));
  c.sts_endpoint = NoTrailingSlash(FirstEnv({"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}));

  ReadProfile(&c);
  if (c.profile_explicit && !c.profile_found && c.error.empty()) {
    c.error = "the profile '" + c.profile + "' (AWS_PROFILE) is in neither " +
              (c.credentials_file.empty() ? "~/.aws/credentials" : c.credentials_file) + " nor " +
              (c.config_file.empty() ? "~/.aws/config" : c.config_file);
  }
  if (c.sts_endpoint.empty()) c.sts_endpoint = "https://sts." + c.region + ".amazonaws.com";

  c.container_uri = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (c.container_uri.empty() && !Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").empty()) {
    c.container_uri = "http://169.254.170.2" + Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  }
  c.container_token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  c.container_token_file = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");

  c.imds_disabled = Lower(Env("AWS_EC2_METADATA_DISABLED")) == "true";
  const std::string imds = NoTrailingSlash(Env("AWS_EC2_METADATA_SERVICE_ENDPOINT"));
  if (!imds.empty()) {
    c.imds_endpoint = imds;
  } else if (Lower(Env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")) == "ipv6") {
    c.imds_endpoint = "http://[fd00:ec2::254]";
  }
  c.imds_timeout_ms = 1000 * PositiveEnv("AWS_METADATA_SERVICE_TIMEOUT", 1);
  c.imds_attempts = PositiveEnv("AWS_METADATA_SERVICE_NUM_ATTEMPTS", 1);
  return c;
}

std::string AwsConfig::Key() const {
  std::string key;
  for (const std::string* part :
       {&env_access_key_id, &env_secret_access_key, &env_session_token, &profile, &credentials_file,
        &config_file, &profile_access_key_id, &profile_secret_access_key, &profile_session_token,
        &profile_unsupported, &web_identity_token_file, &role_arn, &role_session_name, &region,
        &sts_endpoint, &container_uri, &container_token, &container_token_file, &imds_endpoint}) {
    key += *part;
    key.push_back('\n');
  }
  key += imds_disabled ? "imds-off" : "imds-on";
  key += "\n" + std::to_string(imds_timeout_ms) + "\n" + std::to_string(imds_attempts);
  return key;
}

}  // namespace mm::reader::internal
