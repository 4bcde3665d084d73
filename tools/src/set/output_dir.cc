// output_dir.cc: see output_dir.h.
#include "set/output_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "ingest/ingest.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

fs::path NormalOutput(const std::string& given) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(given), ec).lexically_normal();
  if (ec) p = fs::path(given).lexically_normal();
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "a/b/" -> "a/b"
  if (!p.has_relative_path()) return p;                                    // the root itself
  fs::path parent = fs::weakly_canonical(p.parent_path(), ec);
  if (ec) return p;
  return parent / p.filename();
}

Status RefuseUrlOutput(const std::string& given, const std::string& what) {
  if (!IsRemoteUrl(given)) return Status::OK();
  return Status::InvalidArgument(what + " '" + given +
                                 "' is a URL; mmpack writes local files only: write to a local "
                                 "path (and publish a set with `mmpack upload DIR URL`)");
}

fs::path StagingPath(const fs::path& out) {
  return out.parent_path() / (out.filename().string() + ".mmpack-partial");
}

namespace {

// A staging folder left by a build holds only what builds write there; anything else (a
// user's notes, which a --resume leaves there rather than publish: set_publish.h) is someone
// else's and is not deleted with it.
Status CheckStagingIsOurs(const fs::path& staging) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(staging, ec))) return Status::OK();
  for (fs::directory_iterator it(staging, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    if (tmp) name.resize(name.size() - 4);
    if (name == ".resume" || name == ".parts" || name == format::kIndexFile ||
        name == format::kReportFile || name == format::kTokenizerFile ||
        format::ParseShardFileName(name, nullptr) || tmp) {
      continue;
    }
    return Status::AlreadyExists(staging.string() + " holds '" + it->path().filename().string() +
                                 "', which no build wrote; move it away (the folder is replaced "
                                 "by this build)");
  }
  return Status::OK();
}

}  // namespace

Result<fs::path> MakeStaging(const fs::path& out) {
  std::error_code ec;
  fs::path parent = out.parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      return Status::IOError("cannot create output directory '" + out.string() +
                             "': " + ec.message());
    }
  }
  fs::path staging = StagingPath(out);
  MM_RETURN_NOT_OK(CheckStagingIsOurs(staging));
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec) || ec) {
    return Status::IOError("cannot create output directory '" + out.string() + "' (" +
                           staging.string() +
                           "): " + (ec ? ec.message() : std::string("unknown error")));
  }
  return staging;
}

StagingGuard::~StagingGuard() {
  if (!path_.empty()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

Status WriteText(const fs::path& path, const std::string& text) {
  // write(2), so that a failure says why ("cannot write PATH: No space left on device");
  // std::ofstream keeps only that something failed.
  const std::string what = "cannot write " + path.string();
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, what);
  MM_RETURN_NOT_OK(WriteAll(fd.get(), text.data(), text.size(), what));
  if (::close(fd.Release()) != 0) return ErrnoStatus(errno, what);
  return Status::OK();
}

}  // namespace mm::pack
