// test_servers.h: real servers on 127.0.0.1 for the remote-set tests, each a child process the
// test starts and kills:
//   - s3rver (npm, pinned by tests/remote/package-lock.json, installed into the build tree's
//     tests/remote/node_modules by the ctest fixture remote_servers_setup, which runs
//     tests/remote/npm_setup.sh), a real S3-compatible server. It does
//     NOT verify Signature V4 signatures (its lib/middleware/authentication.js: "Signature
//     version 4 calculation is unimplemented"): it refuses an unknown access key id (403
//     InvalidAccessKeyId) and a request without x-amz-content-sha256, and accepts any secret;
//   - tests/remote/http_server.py (/usr/bin/python3): plain HTTP with injected failures, and an
//     AWS Signature V4 verifier (--sigv4 KEY:SECRET) for the signing s3rver does not check;
//   - tests/remote/aws_identity_server.py: a fake instance metadata service (IMDSv2) and STS
//     (AssumeRoleWithWebIdentity) that check the requests they get and issue credentials.
// No test talks to any address outside 127.0.0.1. Output of each server goes to a log file in
// the test's directory; its port is read from there (bounded wait).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mm/status.h"

namespace mm::testing {

inline std::string SourceDir() {
  const char* env = std::getenv("MM_SOURCE_DIR");
#ifdef MM_SOURCE_DIR
  return env ? env : MM_SOURCE_DIR;
#else
  return env ? env : "";
#endif
}

/// A server process this test started; SIGTERM (then SIGKILL after 5 s) and reaped when
/// destroyed or Kill()ed.
class ServerProcess {
 public:
  ~ServerProcess() { Kill(); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  /// Starts argv with stdout and stderr into `log`, then waits (at most timeout_s) until the
  /// log matches `port_pattern` (its first group: the port).
  static Result<std::unique_ptr<ServerProcess>> Start(const std::vector<std::string>& argv,
                                                      const std::string& log,
                                                      const std::string& port_pattern,
                                                      int timeout_s = 30) {
    std::unique_ptr<ServerProcess> p(new ServerProcess());
    p->log_ = log;
    std::vector<char*> args;  // built before fork: the child only opens, dups and execs
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return Status::IOError("fork failed");
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(args[0], args.data());
      _exit(127);
    }
    p->pid_ = pid;
    const std::regex pattern(port_pattern);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(log);
      std::stringstream text;
      text << in.rdbuf();
      std::smatch m;
      const std::string s = text.str();
      if (std::regex_search(s, m, pattern)) {
        p->port_ = std::stoi(m[1].str());
        return p;
      }
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        p->pid_ = -1;
        return Status::IOError(argv[0] + " exited before listening: " + s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::IOError(argv[0] + " did not report its port within " +
                           std::to_string(timeout_s) + " s (log " + log + ")");
  }

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

/// Where node and s3rver are; empty strings when absent.
inline std::string NodeBinary() {
  for (const char* p : {"/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}
inline std::string S3rverScript() {
#ifdef MM_NODE_DIR
  return std::string(MM_NODE_DIR) + "/node_modules/s3rver/bin/s3rver.js";
#else
  return SourceDir() + "/tests/remote/node_modules/s3rver/bin/s3rver.js";
#endif
}

/// s3rver on 127.0.0.1 serving bucket `bucket` from `dir` (keys S3RVER / S3RVER).
/// Errors: IOError (s3rver not installed: see S3rverScript; did not start).
inline Result<std::unique_ptr<ServerProcess>> StartS3rver(const std::string& dir,
                                                          const std::string& bucket) {
  if (::access(S3rverScript().c_str(), R_OK) != 0) {
    return Status::IOError(
        S3rverScript() +
        " is missing: ctest's fixture remote_servers_setup installs it (tests/remote/npm_setup.sh; "
        "its output says why it did not)");
  }
  std::filesystem::create_directories(dir);
  return ServerProcess::Start({NodeBinary(), S3rverScript(), "-d", dir, "-a", "127.0.0.1", "-p",
                               "0", "--silent", "--configure-bucket", bucket},
                              dir + ".log", "listening on 127\\.0\\.0\\.1:([0-9]+)");
}

/// tests/remote/http_server.py on 127.0.0.1 serving `root`, with `extra` arguments (--fail,
/// --sigv4, --log).
inline Result<std::unique_ptr<ServerProcess>> StartHttpServer(
    const std::string& root, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {"/usr/bin/python3", SourceDir() + "/tests/remote/http_server.py",
                                   "--root", root};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return ServerProcess::Start(argv, root + ".http.log", "^([0-9]+)\\n");
}

/// tests/remote/aws_identity_server.py on 127.0.0.1 (a fake IMDSv2 and STS) with `extra`
/// arguments (--issued is `dir`/issued.jsonl, --log `dir`/identity.log).
inline Result<std::unique_ptr<ServerProcess>> StartIdentityServer(
    const std::string& dir, const std::vector<std::string>& extra = {}) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   SourceDir() + "/tests/remote/aws_identity_server.py",
                                   "--issued",
                                   dir + "/issued.jsonl",
                                   "--log",
                                   dir + "/identity.log"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return ServerProcess::Start(argv, dir + "/identity.out", "^([0-9]+)\\n");
}

/// Sets environment variables for the scope, restoring the previous values after.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->had) {
        ::setenv(it->name.c_str(), it->value.c_str(), 1);
      } else {
        ::unsetenv(it->name.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    ::unsetenv(name.c_str());
  }
  /// The variables an S3 client reads, pointed at `endpoint` with s3rver's keys.
  void S3(const std::string& endpoint, const std::string& key = "S3RVER",
          const std::string& secret = "S3RVER") {
    Set("AWS_ENDPOINT_URL", endpoint);
    Set("AWS_ACCESS_KEY_ID", key);
    Set("AWS_SECRET_ACCESS_KEY", secret);
    Set("AWS_REGION", "us-east-1");
    Unset("AWS_SESSION_TOKEN");
  }

 private:
  struct Saved {
    std::string name, value;
    bool had;
  };
  void Save(const std::string& name) {
    const char* v = std::getenv(name.c_str());
    saved_.push_back({name, v ? v : "", v != nullptr});
  }
  std::vector<Saved> saved_;
};

/// Requests in an http_server.py --log file whose line contains `needle`.
inline int CountLogLines(const std::string& log, const std::string& needle) {
  std::ifstream in(log);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace mm::testing
