// part_claim.cc: see build_part_claim.h.
#include "build/part_claim.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "mm/internal/file.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

fs::path LockPath(const fs::path& staging, int64_t index, int64_t count) {
  return PartsFolder(staging) / (PartName(index, count) + ".lock");
}

std::string UtcText(std::time_t t) {
  std::tm tm{};
  char text[40] = "?";
  if (::gmtime_r(&t, &tm) != nullptr)
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

// The holder the lock file `fd` names, with its mtime; false when it names none (not yet
// written, or not one of ours).
bool ReadHolder(int fd, PartHolder* h) {
  char buf[4096];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  struct stat st {};
  if (n <= 0 || ::fstat(fd, &st) != 0) return false;
  const auto j = nlohmann::json::parse(std::string(buf, static_cast<size_t>(n)), nullptr,
                                       /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  try {
    h->pid = j.at("pid").get<int64_t>();
    h->host = j.at("host").get<std::string>();
    h->start = j.at("start").get<std::time_t>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  h->beat = st.st_mtime;
  return true;
}

}  // namespace

// The lock's file descriptor and the thread that touches it.
struct PartClaim::Heartbeat {
  UniqueFd fd;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void Start() {
    thread = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex);
      while (
          !wake.wait_for(lock, std::chrono::seconds(kHeartbeatSeconds), [this] { return stop; })) {
        ::futimens(fd.get(), nullptr);  // best effort: a missed beat only delays a verdict
      }
    });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    wake.notify_all();
    if (thread.joinable()) thread.join();
  }
};

PartClaim::PartClaim() = default;

PartClaim::PartClaim(PartClaim&& other) noexcept { *this = std::move(other); }

PartClaim& PartClaim::operator=(PartClaim&& other) noexcept {
  if (this != &other) {
    if (created_staging_ || created_parts_) Abandon();
    path_ = std::move(other.path_);
    staging_ = std::move(other.staging_);
    created_staging_ = std::exchange(other.created_staging_, false);
    created_parts_ = std::exchange(other.created_parts_, false);
    heartbeat_ = std::move(other.heartbeat_);
    other.path_.clear();
  }
  return *this;
}

PartClaim::~PartClaim() {
  if (created_staging_ || created_parts_) Abandon();
}

Result<PartClaim> PartClaim::Take(const fs::path& staging, const PartSpec& part) {
  PartClaim claim;
  claim.staging_ = staging;
  std::error_code ec;
  claim.created_staging_ = fs::create_directory(staging, ec);
  if (!ec) claim.created_parts_ = fs::create_directory(PartsFolder(staging), ec);
  if (ec) {
    return Status::IOError("cannot create " + PartsFolder(staging).string() + ": " + ec.message());
  }
  claim.path_ = LockPath(staging, part.index, part.count);
  auto beat = std::make_unique<Heartbeat>();
  beat->fd = UniqueFd(::open(claim.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!beat->fd.valid()) return ErrnoStatus(errno, "cannot create " + claim.path_.string());
  const std::string who =
      "part " + std::to_string(part.index) + " of " + std::to_string(part.count);
  if (::flock(beat->fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return ErrnoStatus(errno, "cannot lock " + claim.path_.string());
    PartHolder holder;
    const std::string by =
        ReadHolder(beat->fd.get(), &holder) ? holder.Describe() : "another process";
    claim.created_staging_ = claim.created_parts_ = false;  // the holder's, not ours
    return Status::AlreadyExists(who + " is being built by " + by + " (lock " +
                                 claim.path_.string() + "); wait for it, or stop it");
  }
  const std::string line = nlohmann::json({{"pid", static_cast<int64_t>(::getpid())},
                                           {"host", HostName()},
                                           {"start", static_cast<int64_t>(std::time(nullptr))}})
                               .dump() +
                           "\n";
  if (::ftruncate(beat->fd.get(), 0) != 0 ||
      ::pwrite(beat->fd.get(), line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    return ErrnoStatus(errno, "cannot write " + claim.path_.string());
  }
  beat->Start();
  claim.heartbeat_ = std::move(beat);
  return claim;
}

void PartClaim::Abandon() {
  heartbeat_.reset();  // the lock is dropped with the descriptor
  if (path_.empty()) return;
  std::error_code ec;
  if (created_parts_) {
    const fs::path parts = PartsFolder(staging_);
    bool only_ours = true;
    for (auto it = fs::directory_iterator(parts, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      only_ours &= it->path() == path_;
    }
    if (!ec && only_ours) {
      fs::remove(path_, ec);
      fs::remove(parts, ec);                           // only when empty
      if (created_staging_) fs::remove(staging_, ec);  // only when empty
    }
  }
  created_staging_ = created_parts_ = false;
}

std::string PartHolder::Describe() const {
  return "pid " + std::to_string(pid) + " on host " + host + ", started " + UtcText(start);
}

PartHolder PartLiveness(const fs::path& staging, int64_t index, int64_t count) {
  PartHolder h;
  const fs::path path = LockPath(staging, index, count);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return h;  // kNotStarted
  h.state = PartHolder::State::kRunning;
  if (!ReadHolder(fd.get(), &h)) return h;  // being claimed: not written yet
  if (h.host != HostName()) {
    const std::time_t now = std::time(nullptr);
    if (now - h.beat > kHeartbeatTimeoutSeconds) h.state = PartHolder::State::kGone;
    return h;
  }
  // Same host: a pid that no longer exists, or a lock that nobody holds (the pid was reused).
  if (h.pid <= 0 || (::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH)) {
    h.state = PartHolder::State::kGone;
  } else if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd.get(), LOCK_UN);
    h.state = PartHolder::State::kGone;
  }
  return h;
}

}  // namespace mm::pack
