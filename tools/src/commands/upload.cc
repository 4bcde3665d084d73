// upload.cc: `mmpack upload OUT URL` (commands.h). A finished local set goes to an object store
// file by file through the reader's transport (mm/internal/set_files.h: Signature V4, retries),
// in an order that keeps every reader safe:
//   1. the local set is verified first (`mmpack verify`): a broken set is never published;
//   2. an index.json already at URL is deleted, so no reader pairs an old index with new shards;
//   3. each shard, tokenizer.model and report.json, `transfers` PUTs at a time (as rclone's
//      --transfers; object stores serve concurrent requests far faster than one stream);
//   4. index.json last, once every other PUT has succeeded: a reader finds a set only once
//      every file it names is in place.
// A failure at any step stops there with the first error (naming the URL): PUTs already under
// way finish, no new one starts, and URL has no index.json, so readers see no set rather than
// half of one. Running the upload again repeats every PUT (objects are replaced whole).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "commands/commands.h"
#include "commands/human_bytes.h"
#include "commands/set_index.h"
#include "mm/format.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// The set's files that go before index.json: shards, tokenizer, report (when present).
Result<std::vector<std::string>> FilesBeforeIndex(const mm::reader::internal::SetFiles& local) {
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndex(local));
  std::vector<std::string> names;
  for (const auto& shard : index.info.shards) names.push_back(shard.file);
  if (index.info.has_tokenizer) {  // --tokenizer none: no tokenizer.model
    names.push_back(index.tokenizer_file.empty() ? std::string(format::kTokenizerFile)
                                                 : index.tokenizer_file);
  }
  MM_ASSIGN_OR_RETURN(bool has_report, local.Exists(std::string(format::kReportFile)));
  if (has_report) names.emplace_back(format::kReportFile);
  return names;
}

// PUTs `names`, `transfers` at a time, printing one line per stored file.
// Returns the first failure; after it no new PUT starts. Errors: Put's; IOError when the system
// refuses a thread.
Status PutAll(const mm::reader::internal::SetFiles& local,
              const mm::reader::internal::SetFiles& remote, const std::vector<std::string>& names,
              int transfers, bool quiet, std::ostream& out, int64_t* bytes) {
  std::atomic<size_t> next{0};
  std::mutex mu;  // guards first_error, out and *bytes
  Status first_error;
  auto worker = [&] {
    for (size_t i = next++; i < names.size(); i = next++) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      const std::string path = local.Display(names[i]);
      Status st = remote.Put(names[i], path);
      std::error_code ec;
      const auto size = fs::file_size(path, ec);
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok()) {
        if (first_error.ok()) first_error = std::move(st);
        return;
      }
      *bytes += ec ? 0 : static_cast<int64_t>(size);
      if (!quiet) out << "upload: " << remote.Display(names[i]) << std::endl;
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(transfers, static_cast<int>(names.size())));
  for (int t = 1; t < n; ++t) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok())
        first_error = Status::IOError("cannot start an upload thread: " + std::string(e.what()));
      break;
    }
  }
  worker();  // this thread is one of the n
  for (auto& t : threads) t.join();
  return first_error;
}

}  // namespace

Status RunUpload(const UploadOptions& options, std::ostream& out) {
  MM_ASSIGN_OR_RETURN(auto remote, OpenSetFiles(options.url, options.remote));
  if (!remote->remote()) {
    return Status::InvalidArgument("'" + options.url +
                                   "' is not a remote location (s3://BUCKET/PREFIX or "
                                   "http(s)://URL); a local set is copied with cp -r");
  }
  MM_ASSIGN_OR_RETURN(auto local, OpenSetFiles(options.dir, {}));
  if (local->remote()) {
    return Status::InvalidArgument("'" + options.dir + "' is remote: upload a local set");
  }
  std::ostringstream verify_out;
  Status verified = RunVerify(options.dir, verify_out);
  if (!verified.ok()) return verified.WithContext("not uploaded: " + options.dir);
  MM_ASSIGN_OR_RETURN(std::vector<std::string> names, FilesBeforeIndex(*local));
  const std::string index_name(format::kIndexFile);
  MM_RETURN_NOT_OK(remote->Remove(index_name));
  int64_t bytes = 0;
  MM_RETURN_NOT_OK(PutAll(*local, *remote, names, options.transfers, options.quiet, out, &bytes));
  MM_RETURN_NOT_OK(PutAll(*local, *remote, {index_name}, 1, options.quiet, out, &bytes));
  out << "upload: OK: " << names.size() + 1 << " files, " << HumanBytes(bytes) << " to "
      << remote->root() << std::endl;
  return Status::OK();
}

}  // namespace mm::pack
