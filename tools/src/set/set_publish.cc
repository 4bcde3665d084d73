// set_publish.cc: see set_publish.h.
#include "set/set_publish.h"

#include <fcntl.h>
#include <stdio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "set/set_index.h"
#include "mm/format.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

fs::path AsidePath(const fs::path& out) {
  return out.parent_path() / (out.filename().string() + ".mmpack-old");
}

Status NotASet(const fs::path& dir, const std::string& why) {
  return Status::AlreadyExists("output '" + dir.string() + "' exists and is not an mmpack shard " +
                               "set (" + why + "); refusing to delete it");
}

// The names a set in `dir` lists, from its index.json.
Result<std::set<std::string>> ListedNames(const fs::path& dir) {
  auto files = OpenSetFiles(dir.string(), mm::reader::RemoteOptions());
  if (!files.ok() || (*files)->remote()) return NotASet(dir, "not a local folder");
  Result<mm::reader::internal::IndexDocument> index = ReadSetIndex(**files);
  if (!index.ok()) return NotASet(dir, "no valid index.json: " + index.status().message());
  std::set<std::string> names = {std::string(format::kIndexFile), std::string(format::kReportFile)};
  if (index->info.has_tokenizer) {
    names.insert(index->tokenizer_file.empty() ? std::string(format::kTokenizerFile)
                                               : index->tokenizer_file);
  }
  for (const mm::reader::ShardEntry& s : index->info.shards) names.insert(s.file);
  return names;
}

// rename(2) of `from` to `to`, as a Status naming both.
Status Rename(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) {
    return Status::IOError("cannot rename " + from.string() + " to " + to.string() + ": " +
                           ec.message());
  }
  return Status::OK();
}

// The fallback of Publish: OUT aside, the new set in, the old one deleted.
Status PublishByTwoRenames(const fs::path& staging, const fs::path& out) {
  const fs::path aside = AsidePath(out);
  MM_RETURN_NOT_OK(Rename(out, aside));
  Status in = Rename(staging, out);
  if (!in.ok()) {
    Status back = Rename(aside, out);
    return back.ok() ? in
                     : Status::IOError(in.message() + "; the old set is left at " + aside.string());
  }
  std::error_code ec;
  fs::remove_all(aside, ec);
  if (ec) {
    std::fprintf(stderr, "mmpack build: warning: cannot remove the old set %s: %s\n",
                 aside.string().c_str(), ec.message().c_str());
  }
  return Status::OK();
}

}  // namespace

Status CheckReplaceable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return NotASet(dir, "not a folder");
  if (fs::is_empty(dir, ec) && !ec) return Status::OK();
  MM_ASSIGN_OR_RETURN(std::set<std::string> listed, ListedNames(dir));
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (listed.count(name) == 0) {
      return NotASet(dir, "it holds '" + name + "', which the set's index.json does not list");
    }
    if (!fs::is_regular_file(it->symlink_status(ec))) {
      return NotASet(dir, "'" + name + "' is not a regular file");
    }
  }
  if (ec) return NotASet(dir, "cannot list it: " + ec.message());
  return Status::OK();
}

Status RecoverInterruptedPublish(const fs::path& out, std::ostream& log) {
  const fs::path aside = AsidePath(out);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(aside, ec))) return Status::OK();
  if (!fs::exists(fs::symlink_status(out, ec))) {
    MM_RETURN_NOT_OK(Rename(aside, out));
    log << "mmpack build: recovered the previous set of " << out.string() << " from "
        << aside.string() << " (an earlier build was killed while replacing it)\n";
    return Status::OK();
  }
  if (!CheckReplaceable(aside).ok()) {
    log << "mmpack build: warning: " << aside.string()
        << " is not an mmpack shard set; left alone\n";
    return Status::OK();
  }
  fs::remove_all(aside, ec);
  if (ec)
    return Status::IOError("cannot remove the old set " + aside.string() + ": " + ec.message());
  log << "mmpack build: removed " << aside.string()
      << ", the old set an earlier build replaced before it was killed\n";
  return Status::OK();
}

Status Publish(const fs::path& staging, const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return Rename(staging, out);
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      return Status::IOError("cannot exchange " + staging.string() + " and " + out.string() + ": " +
                             std::strerror(errno));
    }
    return PublishByTwoRenames(staging, out);
  }
  fs::remove_all(staging, ec);  // the old set, now in the staging folder
  if (ec) {
    std::fprintf(stderr, "mmpack build: warning: cannot remove the old set %s: %s\n",
                 staging.string().c_str(), ec.message().c_str());
  }
  return Status::OK();
}

Status PublishListed(const fs::path& staging, const fs::path& out, std::ostream& log) {
  MM_ASSIGN_OR_RETURN(std::set<std::string> listed, ListedNames(staging));
  std::vector<std::string> foreign;
  std::error_code ec;
  for (fs::directory_iterator it(staging, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (listed.count(name) == 0 || !fs::is_regular_file(it->symlink_status(ec))) {
      foreign.push_back(name);
    }
  }
  if (ec) return Status::IOError("cannot list " + staging.string() + ": " + ec.message());
  if (foreign.empty()) return Publish(staging, out);
  // The set's own files into a clean folder, which is published; the rest stays where it is.
  const fs::path clean = out.parent_path() / (out.filename().string() + ".mmpack-publish");
  fs::remove_all(clean, ec);  // left by a publish that was killed: ours
  if (!fs::create_directory(clean, ec) || ec) {
    return Status::IOError("cannot create " + clean.string() + ": " +
                           (ec ? ec.message() : std::string("it exists")));
  }
  for (const std::string& name : listed) {
    if (fs::exists(fs::symlink_status(staging / name, ec))) {
      MM_RETURN_NOT_OK(Rename(staging / name, clean / name));
    }
  }
  MM_RETURN_NOT_OK(Publish(clean, out));
  std::sort(foreign.begin(), foreign.end());
  std::string names;
  for (size_t i = 0; i < foreign.size() && i < 5; ++i) names += (i ? ", " : "") + foreign[i];
  if (foreign.size() > 5) names += " and " + std::to_string(foreign.size() - 5) + " more";
  log << "mmpack build: note: " << staging.string() << " held what this build did not write ("
      << names << "): not published, left there\n";
  return Status::OK();
}

}  // namespace mm::pack
