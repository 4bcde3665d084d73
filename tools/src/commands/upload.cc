// upload.cc: `mmpack upload OUT URL` (commands.h): a finished local set goes to an object store
// as a sync, through the reader's transport (mm/internal/set_files.h: Signature V4, retries,
// multipart uploads), in an order that keeps every reader safe:
//   1. the local set is verified first (`mmpack verify`): a broken set is never published;
//   2. each file's object is asked for (HEAD, `transfers` at a time): one whose size and XXH3-64
//      match the local file's is left as it is. The XXH3-64 is the one index.json holds for
//      each shard (computed here for the tokenizer, report.json and index.json), stored with
//      each object as the user metadata x-amz-meta-mmpack-xxh3 when it is sent. Why not the
//      ETag: it is the MD5 of the bytes only for a single-part upload without SSE-KMS (a
//      multipart ETag depends on the part size; GCS's composite objects have no MD5), and
//      comparing it would need an MD5 pass over every local file. An object without that
//      metadata (stored by another tool) is sent again, once;
//   3. the others (shards, tokenizer.model, report.json), `transfers` at a time (as rclone's
//      --transfers), a file of at least the multipart threshold in parts, each part retried
//      alone (reader/src/remote/object_upload.h);
//   4. index.json last, once every other file is in place, and only when it differs: the
//      remote index.json is never deleted, so a reader finds the previous set or the new one.
//      Shards replaced in place under an old index.json are caught by the XXH3-64 every reader
//      checks on download (Corruption naming the shard), never read as wrong samples.
// A failure stops there with the first error (naming the URL): requests under way finish, no
// new one starts, index.json is not replaced. Running the upload again sends only what is
// missing or differs (an interrupted upload's finished files are skipped).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "commands/commands.h"
#include "set/human_bytes.h"
#include "set/set_index.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/set_files.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using mm::reader::internal::SetFiles;

// One file of the set: its name, local size and XXH3-64, and what the upload did with it.
struct SetFile {
  std::string name;
  int64_t bytes = 0;
  std::string xxh3;
  bool send = false;  // the remote object is missing or differs
};

// The set's files: shards (with index.json's XXH3-64), tokenizer, report (when present), and
// index.json last. Errors: those of reading the local set.
Result<std::vector<SetFile>> ListFiles(const SetFiles& local) {
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndex(local));
  std::vector<SetFile> files;
  for (const auto& shard : index.info.shards)
    files.push_back({shard.file, shard.bytes, shard.xxh3_64});
  std::vector<std::string> others;
  if (index.info.has_tokenizer) {  // --tokenizer none: no tokenizer.model
    others.push_back(index.tokenizer_file.empty() ? std::string(format::kTokenizerFile)
                                                  : index.tokenizer_file);
  }
  MM_ASSIGN_OR_RETURN(bool has_report, local.Exists(std::string(format::kReportFile)));
  if (has_report) others.emplace_back(format::kReportFile);
  others.emplace_back(format::kIndexFile);
  for (const std::string& name : others) {
    const std::string path = local.Display(name);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return Status::IOError(path + ": " + ec.message());
    MM_ASSIGN_OR_RETURN(std::string xxh3, Xxh3HexOfFile(path));
    files.push_back({name, static_cast<int64_t>(size), xxh3});
  }
  return files;
}

// Runs work(i) for i in [0, n), `threads` at a time; after the first failure no new call
// starts. Returns that failure. Errors: work's; IOError when the system refuses a thread.
template <typename Work>
Status ParallelFor(size_t n, int threads, Work work) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first_error;
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      Status st = work(i);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = std::move(st);
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  const int count = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  for (int t = 1; t < count; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) {
        first_error = Status::IOError("cannot start an upload thread: " + std::string(e.what()));
      }
      break;
    }
  }
  worker();  // this thread is one of them
  for (auto& t : pool) t.join();
  return first_error;
}

// Marks the files whose remote object is missing or differs (HEAD each).
Status Compare(const SetFiles& remote, int transfers, std::vector<SetFile>* files) {
  return ParallelFor(files->size(), transfers, [&](size_t i) -> Status {
    SetFile& f = (*files)[i];
    MM_ASSIGN_OR_RETURN(mm::reader::internal::RemoteFileInfo object, remote.Stat(f.name));
    f.send = !object.exists || object.size != f.bytes || object.xxh3 != f.xxh3;
    return Status::OK();
  });
}

std::string Json(const UploadOptions& o, const SetFiles& remote, const std::vector<SetFile>& files,
                 double seconds) {
  nlohmann::ordered_json j;
  int64_t sent = 0, bytes_sent = 0, bytes_total = 0;
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (const SetFile& f : files) {
    bytes_total += f.bytes;
    if (!f.send) continue;
    ++sent;
    bytes_sent += f.bytes;
    names.push_back(f.name);
  }
  j["url"] = remote.root();
  j["set"] = fs::absolute(o.dir).lexically_normal().string();
  j["files"] = files.size();
  j["sent"] = sent;
  j["unchanged"] = static_cast<int64_t>(files.size()) - sent;
  j["bytes_sent"] = bytes_sent;
  j["bytes_total"] = bytes_total;
  j["index_replaced"] = files.back().send;
  j["sent_files"] = names;
  j["seconds"] = seconds;
  return j.dump(2) + "\n";
}

}  // namespace

Status RunUpload(const UploadOptions& options, std::ostream& out) {
  const auto begin = std::chrono::steady_clock::now();
  MM_ASSIGN_OR_RETURN(auto remote, OpenSetFiles(options.url, options.remote));
  if (!remote->remote()) {
    return Status::InvalidArgument("'" + options.url +
                                   "' is not a remote location (s3://BUCKET/PREFIX, "
                                   "gs://BUCKET/PREFIX or http(s)://URL); a local set is copied "
                                   "with cp -r");
  }
  MM_RETURN_NOT_OK(remote->CheckWritable());
  MM_ASSIGN_OR_RETURN(auto local, OpenSetFiles(options.dir, {}));
  if (local->remote()) {
    return Status::InvalidArgument("'" + options.dir + "' is remote: upload a local set");
  }
  std::ostringstream verify_out;
  Status verified = RunVerify(options.dir, verify_out);
  if (!verified.ok()) return verified.WithContext("not uploaded: " + options.dir);
  MM_ASSIGN_OR_RETURN(std::vector<SetFile> files, ListFiles(*local));
  MM_RETURN_NOT_OK(Compare(*remote, options.transfers, &files));

  int64_t to_send = 0;
  for (const SetFile& f : files) to_send += f.send ? f.bytes : 0;
  const int64_t sent_before = mm::reader::internal::RemoteBytesSent();
  ProgressOptions progress = options.report.progress;
  progress.enabled = progress.enabled && !options.quiet && to_send > 0;
  TransferProgress bar(
      "upload", [sent_before] { return mm::reader::internal::RemoteBytesSent() - sent_before; },
      to_send, progress);
  auto put = [&](const SetFile& f) -> Status {
    mm::reader::internal::PutOptions put_options;
    put_options.xxh3 = f.xxh3;
    put_options.multipart_threshold = options.multipart_threshold;
    put_options.part_size = options.part_size;
    MM_RETURN_NOT_OK(remote->Put(f.name, local->Display(f.name), put_options));
    if (!options.quiet && !options.report.json) {
      // Above the terminal's progress line, never on it (and one thread at a time).
      bar.Above([&] {
        out << "upload: sent " << remote->Display(f.name) << " ("
            << HumanBytes(static_cast<double>(f.bytes)) << ")" << std::endl;
      });
    }
    return Status::OK();
  };
  // Every file but index.json, then index.json alone, only after all of them succeeded.
  std::vector<const SetFile*> before;
  for (size_t i = 0; i + 1 < files.size(); ++i) {
    if (files[i].send) before.push_back(&files[i]);
  }
  Status st =
      ParallelFor(before.size(), options.transfers, [&](size_t i) { return put(*before[i]); });
  if (st.ok() && files.back().send) st = put(files.back());
  bar.Finish();
  MM_RETURN_NOT_OK(st);

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (options.report.json) {
    out << Json(options, *remote, files, seconds);
    return Status::OK();
  }
  int64_t sent = 0;
  for (const SetFile& f : files) sent += f.send ? 1 : 0;
  out << "upload: OK: " << files.size() << " files to " << remote->root() << ": " << sent
      << " sent (" << HumanBytes(static_cast<double>(to_send)) << "), "
      << files.size() - static_cast<size_t>(sent) << " unchanged" << std::endl;
  return Status::OK();
}

}  // namespace mm::pack
