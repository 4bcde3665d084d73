// upload.cc: `mmpack upload OUT URL` (commands.h). A finished local set goes to an object store
// file by file through the reader's transport (mm/internal/set_files.h: Signature V4, retries),
// in an order that keeps every reader safe:
//   1. the local set is verified first (`mmpack verify`): a broken set is never published;
//   2. an index.json already at URL is deleted, so no reader pairs an old index with new shards;
//   3. each shard, tokenizer.model and report.json;
//   4. index.json last: a reader finds a set only once every file it names is in place.
// A failure at any step stops there with the first error (naming the URL); URL then has no
// index.json, so readers see no set rather than half of one. Running the upload again repeats
// every PUT (objects are replaced whole).
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "commands/human_bytes.h"
#include "commands/set_index.h"
#include "mm/format.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// The set's files in upload order: shards, tokenizer, report (when present), index.json.
Result<std::vector<std::string>> UploadOrder(const mm::reader::internal::SetFiles& local) {
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndex(local));
  std::vector<std::string> names;
  for (const auto& shard : index.info.shards) names.push_back(shard.file);
  names.push_back(index.tokenizer_file.empty() ? std::string(format::kTokenizerFile)
                                               : index.tokenizer_file);
  MM_ASSIGN_OR_RETURN(bool has_report, local.Exists(std::string(format::kReportFile)));
  if (has_report) names.emplace_back(format::kReportFile);
  names.emplace_back(format::kIndexFile);
  return names;
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
  MM_ASSIGN_OR_RETURN(std::vector<std::string> names, UploadOrder(*local));
  MM_RETURN_NOT_OK(remote->Remove(std::string(format::kIndexFile)));
  int64_t bytes = 0;
  for (const std::string& name : names) {
    const std::string path = local->Display(name);
    MM_RETURN_NOT_OK(remote->Put(name, path));
    std::error_code ec;
    bytes += static_cast<int64_t>(fs::file_size(path, ec));
    if (!options.quiet) out << "upload: " << remote->Display(name) << std::endl;
  }
  out << "upload: OK: " << names.size() << " files, " << HumanBytes(bytes) << " to "
      << remote->root() << std::endl;
  return Status::OK();
}

}  // namespace mm::pack
