// files.cc: a folder of pairs, key.jpg beside key.txt (ingest.h, "files").
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/common.h"
#include "ingest/formats.h"
#include "ingest/keys.h"
#include "mm/internal/file.h"
#include "text/ascii.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// The regular files under `root` (links followed), each folder read once, handed to `file`: a
// folder reached again (a symlink loop such as `a/up -> ..`, or a second link to the same
// folder) is not read again, which also ends what would otherwise recurse without end. Entries
// of a folder are visited in bytewise name order (through an external sort: a folder of
// millions of pairs is not held), so which of two links to one folder is read does not depend
// on the file system's listing order. An entry whose status cannot be read (a link to itself,
// a dangling link) is not a file. A subfolder that cannot be listed becomes an `unreadable`
// issue; the root itself failing is an error.
Status ListTree(const fs::path& root, const fs::path& spill_dir,
                const std::function<Status(const fs::path&)>& file, IngestResult* result) {
  struct stat root_st;
  if (::stat(root.c_str(), &root_st) != 0) {
    return ErrnoStatus(errno, "cannot list " + root.string());
  }
  std::set<std::pair<dev_t, ino_t>> seen = {{root_st.st_dev, root_st.st_ino}};
  std::vector<fs::path> stack = {root};
  while (!stack.empty()) {
    fs::path dir = std::move(stack.back());
    stack.pop_back();
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    ExternalSorter entries(spill_dir, SortMemoryBytes());
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      MM_RETURN_NOT_OK(entries.Add(it->path().string(), {}));
    }
    if (ec) {
      if (dir == root) return Status::IOError("cannot list " + root.string() + ": " + ec.message());
      result->issues.push_back({dir.lexically_relative(root).generic_string(), "", "unreadable",
                                "cannot list folder: " + ec.message()});
      continue;
    }
    MM_RETURN_NOT_OK(entries.Finish());
    std::vector<fs::path> subdirs;
    for (std::string name, unused;;) {
      MM_ASSIGN_OR_RETURN(bool more, entries.Next(&name, &unused));
      if (!more) break;
      const fs::path e(name);
      struct stat st;
      if (::stat(e.c_str(), &st) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        MM_RETURN_NOT_OK(file(e));
      } else if (S_ISDIR(st.st_mode)) {
        if (seen.insert({st.st_dev, st.st_ino}).second) {
          subdirs.push_back(e);
        } else {
          result->notes.push_back(e.lexically_relative(root).generic_string() +
                                  ": a folder already read (symlink loop or second link); "
                                  "not read again");
        }
      }
    }
    // Depth first, in name order.
    for (auto d = subdirs.rbegin(); d != subdirs.rend(); ++d) stack.push_back(std::move(*d));
  }
  return Status::OK();
}

}  // namespace

Result<IngestResult> IngestFiles(const fs::path& root, const fs::path& spill_dir) {
  IngestResult result;
  result.format = InputFormat::kFiles;
  // Every image and .txt by (key, relative path): a key's files are neighbours, keys in bytewise
  // order (a key holds no NUL: file names cannot).
  ExternalSorter files(spill_dir, SortMemoryBytes());
  MM_RETURN_NOT_OK(ListTree(
      root, spill_dir,
      [&](const fs::path& file) -> Status {
        std::string rel = file.lexically_relative(root).generic_string();
        std::string ext = file.extension().string();
        if (ext.empty()) return Status::OK();
        const std::string e = AsciiLower(ext.substr(1));
        const bool text = e == "txt";
        if (!text && !IsImageExtension(e)) return Status::OK();
        return files.Add(StripExtension(rel) + '\0' + rel, text ? "t" : "i");
      },
      &result));
  MM_RETURN_NOT_OK(files.Finish());
  MM_ASSIGN_OR_RETURN(result.list, SampleList::Create(spill_dir));
  // One key's images (in path order) and caption file (the last in path order).
  std::string key;
  std::vector<std::string> images;
  std::string text;
  auto close = [&]() -> Status {
    if (images.empty()) {
      result.issues.push_back({text, key, "missing_file", "caption file without an image"});
      return Status::OK();
    }
    for (size_t i = 1; i < images.size(); ++i) {
      result.issues.push_back(
          {images[i], key, "duplicate_key", "another image has the same key: " + images[0]});
    }
    if (text.empty()) {
      result.issues.push_back({images[0], key, "missing_caption", "no " + key + ".txt"});
      return Status::OK();
    }
    std::string caption;
    Status st = ReadRegularFile((root / text).string(), &caption, kMaxCaptionFileBytes);
    if (!st.ok()) {
      result.issues.push_back(
          {text, key, st.code() == StatusCode::kOutOfRange ? "file_too_large" : "unreadable",
           st.message()});
      return Status::OK();
    }
    StripBom(&caption);
    StripOneNewline(&caption);
    RawSample s;
    s.key = key;
    s.source = images[0];
    s.path = (root / images[0]).string();
    s.captions.push_back(std::move(caption));
    return result.list->Add(s);
  };
  bool open = false;
  for (std::string k, kind;;) {
    MM_ASSIGN_OR_RETURN(bool more, files.Next(&k, &kind));
    if (!more) break;
    const size_t nul = k.find('\0');
    const std::string_view this_key(k.data(), nul);
    if (!open || this_key != key) {
      if (open) MM_RETURN_NOT_OK(close());
      key.assign(this_key);
      images.clear();
      text.clear();
      open = true;
    }
    std::string rel = k.substr(nul + 1);
    if (kind == "t") {
      text = std::move(rel);
    } else {
      images.push_back(std::move(rel));
    }
  }
  if (open) MM_RETURN_NOT_OK(close());
  MM_RETURN_NOT_OK(result.list->Finish());
  return result;
}

}  // namespace mm::pack
